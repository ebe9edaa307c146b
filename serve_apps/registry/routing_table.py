"""The routing table: which model names and aliases exist, and where their engines live.

Pure data plus resolution rules, shared by the gateway (which reads it) and the fleet
registry (which owns it). No Ray import: the gateway's routing decisions are unit-testable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from domain.alias_map import aliases_by_model
from domain.model_state import ModelState


@dataclass(frozen=True)
class ModelRoute:
    """One model as the gateway sees it."""

    name: str
    app_name: str
    deployment_name: str
    state: ModelState
    source: str = ""
    layout: str = ""
    replicas: int = 1
    replaced_by: str | None = None
    error: str | None = None
    wake_s: float | None = None
    """PARKED: how long a wake is predicted to take (its last wake, else its last start);
    None when the manager cannot tell."""
    ready_by: float | None = None
    """WAKING: when the manager expects it to serve (Unix time); None when it cannot tell."""
    wakes_ended: int = 0
    """Wakes of it that ended without serving (refused or failed): a gateway holding a
    request for it refuses the request once this grows past what it saw when it asked."""
    error_code: str | None = None
    """The gateway's error code for `error` (`capacity_busy` for a wake that did not fit);
    None: `model_unavailable`."""


@dataclass(frozen=True)
class RoutingTable:
    """An immutable, versioned snapshot. Every change makes a new table with version + 1.

    Versions only grow within an `epoch`: the registry keeps the table in durable state and
    restores it, version included, after a restart. A new epoch starts only when that state
    is gone and the manager has rebuilt the table from its journal, so a gateway takes a
    table from another epoch as the manager's word, and within its epoch only a newer one
    (serve_apps/registry/route_view.py).
    """

    version: int = 0
    epoch: str = ""
    """Which lineage of tables this is: minted by a registry that started without state."""
    # Plain dicts, never mutated after construction: the table crosses Ray actor
    # boundaries by pickling, which mappingproxy does not support.
    models: Mapping[str, ModelRoute] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)
    holds: Mapping[str, float | None] = field(default_factory=dict)
    """Aliases whose requests wait in the gateway (a swap is moving them), not failed, each
    with when the manager expects its hold to end (Unix time, from the new model's last
    start; None when it cannot tell). A gateway refuses at once what would wait longer
    than it holds. A parked or waking model's hold is its route's (`wake_s`, `ready_by`)."""

    @property
    def held_aliases(self) -> frozenset[str]:
        return frozenset(self.holds)

    def with_model(self, route: ModelRoute) -> RoutingTable:
        models = dict(self.models)
        models[route.name] = route
        return replace(self, version=self.version + 1, models=models)

    def with_state(self, name: str, state: ModelState, error: str | None = None) -> RoutingTable:
        route = self.models[name]
        return self.with_model(replace(route, state=state, error=error))

    def without_model(self, name: str, replaced_by: str | None = None) -> RoutingTable:
        """Mark `name` REMOVED (a tombstone) and drop aliases that pointed to it."""
        route = self.models[name]
        tomb = replace(route, state=ModelState.REMOVED, replaced_by=replaced_by)
        table = self.with_model(tomb)
        aliases = {a: m for a, m in table.aliases.items() if m != name}
        return replace(table, aliases=aliases)

    def with_alias(self, alias: str, name: str) -> RoutingTable:
        return self.with_aliases({alias: name})

    def with_aliases(self, aliases: Mapping[str, str]) -> RoutingTable:
        """Every alias of `aliases` pointing at its model, in one version (a model's
        thousand aliases are one table change, not a thousand)."""
        return replace(self, version=self.version + 1, aliases={**self.aliases, **aliases})

    def with_switch(
        self, route: ModelRoute, aliases: Iterable[str], replaced: str | None
    ) -> RoutingTable:
        """`route` serving `aliases`, in one version: the model it replaces becomes a
        tombstone naming it (with the aliases that were its own dropped), and the moved
        aliases are no longer held. Gateways see the whole switch or none of it."""
        table = self.with_model(route)
        # A same-name swap replaces the route itself: no tombstone.
        if replaced is not None and replaced != route.name and replaced in table.models:
            table = table.without_model(replaced, replaced_by=route.name)
        moving = frozenset(aliases)
        # A same-name swap also held the model's own name.
        released = moving | {route.name}
        return replace(
            table,
            version=self.version + 1,
            aliases={**table.aliases, **dict.fromkeys(moving, route.name)},
            holds={a: end for a, end in self.holds.items() if a not in released},
        )

    def with_holds(self, holds: Mapping[str, float | None]) -> RoutingTable:
        """`holds` added (an alias held already gets its new predicted end)."""
        return replace(self, version=self.version + 1, holds={**self.holds, **holds})

    def without_holds(self, aliases: Iterable[str] | None = None) -> RoutingTable:
        """`aliases` released (None: every hold)."""
        released = None if aliases is None else frozenset(aliases)
        kept = (
            {}
            if released is None
            else {a: end for a, end in self.holds.items() if a not in released}
        )
        return replace(self, version=self.version + 1, holds=kept)

    def supersedes(self, held: RoutingTable) -> bool:
        """Whether a gateway holding `held` should take this table instead: newer in the
        same epoch, or the first of a rebuilt epoch. Never an older table (a registry
        restored from a stale copy) nor, as that implies, an emptier one."""
        return self.epoch != held.epoch or self.version > held.version

    def aliases_of(self, name: str) -> tuple[str, ...]:
        return tuple(sorted(a for a, m in self.aliases.items() if m == name))

    def aliases_by_model(self) -> dict[str, tuple[str, ...]]:
        """Each model's aliases, sorted (domain/alias_map.py)."""
        return aliases_by_model(self.aliases)

    def live_models(self) -> tuple[ModelRoute, ...]:
        """Models that exist now (every state but REMOVED), sorted by name."""
        return tuple(r for _, r in sorted(self.models.items()) if r.state is not ModelState.REMOVED)

    def resolve(self, requested: str) -> Resolution:
        """What the gateway should do with a request naming `requested`."""
        if requested in self.holds:
            return Hold(alias=requested, ends_at=self.holds[requested])
        name = self.aliases.get(requested, requested)
        route = self.models.get(name)
        if route is None:
            return Refuse(404, "model_not_found", f"The model '{requested}' does not exist.")
        if route.state is ModelState.REMOVED:
            if route.replaced_by:
                message = (
                    f"The model '{requested}' was removed and replaced by "
                    f"'{route.replaced_by}'; send requests to '{route.replaced_by}' instead."
                )
            else:
                message = f"The model '{requested}' was removed."
            return Refuse(404, "model_not_found", message)
        if route.state is ModelState.READY:
            return Forward(route=route)
        if route.state is ModelState.PARKED:
            # Held while the manager wakes it; the gateway asks for the wake.
            return Hold(alias=requested, wake=route, predicted_s=route.wake_s, for_wake=True)
        if route.state is ModelState.WAKING:
            return Hold(alias=requested, ends_at=route.ready_by, for_wake=True)
        if route.state is ModelState.FAILED:
            return Refuse(
                503, "model_unavailable", f"The model '{name}' failed to start: {route.error}"
            )
        return Refuse(
            503,
            "model_unavailable",
            f"The model '{name}' is {route.state.value}; retry shortly.",
            route=route,
        )


@dataclass(frozen=True)
class Forward:
    route: ModelRoute


@dataclass(frozen=True)
class Hold:
    """Wait for the table to change: a swap is moving `alias`, or its model is parked or
    waking."""

    alias: str
    """What the request named (a model or an alias)."""
    ends_at: float | None = None
    """When the manager expects the hold to end (Unix time); None when it cannot tell."""
    wake: ModelRoute | None = None
    """The parked model to ask the manager to wake."""
    predicted_s: float | None = None
    """For a wake not started yet: how long it is predicted to take."""
    for_wake: bool = False
    """Held for a parked or waking model (else for a swap)."""


@dataclass(frozen=True)
class Refuse:
    status: int
    code: str
    message: str
    route: ModelRoute | None = None
    """The refused model, when it exists (a 503 for its state)."""


Resolution = Forward | Hold | Refuse
