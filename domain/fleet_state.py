"""The fleet's desired state: which models serve, under which app generation, and aliases.

Persisted as `fleet.json` in the manager's state directory (cluster/fleet/journal.py), with a
format version: a file of another format is refused with what to do, never guessed at.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from domain.alias_map import aliases_by_model
from domain.app_name import AppName
from domain.deployment_config import ModelDeploymentConfig
from domain.engine_capacity import CapacityFigures, ModelCapacity
from domain.fleet_file import FleetModelEntry

FLEET_FORMAT_VERSION = 2
"""Format 1 (before generations) had no `format_version` key and `model-<name>` apps."""


WAKE_HISTORY = 5


class WakeRecord(BaseModel):
    """One wake of a model: its path, the prediction from bytes and links alone, and the
    time it took."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    """A `policies.wake_paths.WakePath` value."""
    physics_s: float
    measured_s: float


class FleetModel(BaseModel):
    """One model the fleet serves, as it was requested and where it runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    config: ModelDeploymentConfig
    """What is deployed: the layout resolved, the recipe and platform defaults applied."""
    generation: int = Field(ge=1)
    entry: FleetModelEntry | None = None
    """What was asked for, as written (a fleet file's entry, or one made from `add`'s
    flags): what `diff` compares and `export` writes. None in a fleet.json from before
    fleet files (see `requested`)."""
    parked: bool = False
    """Its engine is unloaded (`switchyard park`); its app `generation` no longer runs, and
    the next wake starts the next generation."""
    last_wake_s: float | None = None
    """How long its latest wake took, admission to warmed (None: never woken)."""
    asleep_level: Literal[1, 2] | None = None
    """Parked by vLLM's sleep mode at this level: its app `generation` still runs, asleep,
    and holds its accelerators (None: serving, or parked by unloading)."""
    wakes: tuple[WakeRecord, ...] = ()
    """Its latest wakes (at most `WAKE_HISTORY`), oldest first: what corrects the
    prediction of its next (policies/wake_paths.py)."""

    @property
    def app(self) -> AppName:
        return AppName(self.config.name, self.generation)

    @property
    def requested(self) -> FleetModelEntry:
        return self.entry if self.entry is not None else FleetModelEntry.of_config(self.config)

    @field_serializer("entry")
    def _entry_as_written(self, entry: FleetModelEntry | None) -> dict[str, Any] | None:
        # Only the fields the operator set, so a reloaded entry still tells them apart
        # from defaults (a recipe or platform default fills those in at deploy time).
        return None if entry is None else entry.model_dump(mode="json", exclude_unset=True)


class FleetState(BaseModel):
    """An immutable snapshot; every change makes a new one (see the `with_*` methods)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format_version: Literal[2] = 2
    models: dict[str, FleetModel] = Field(default_factory=dict)
    aliases: dict[str, str] = Field(default_factory=dict)
    """alias -> model name."""
    startup_seconds: dict[str, float] = Field(default_factory=dict)
    """How long the last start of each (source, layout) took, deploy to warmed: what the
    manager predicts a break-before-make hold from."""
    generations: dict[str, int] = Field(default_factory=dict)
    """The last generation handed out per model name, kept after a model is removed so a
    new deployment of that name never reuses the app name of one still shutting down."""
    capacity: dict[str, ModelCapacity] = Field(default_factory=dict)
    """Per served model: admission's prediction and what its engine logged at start-up."""
    observed_capacity: dict[str, CapacityFigures] = Field(default_factory=dict)
    """`CapacityKey` digest -> what an engine of that deployment logged; kept after the
    model is removed, so the next admission of the same deployment uses it."""

    def startup_of(self, config: ModelDeploymentConfig) -> float | None:
        return self.startup_seconds.get(startup_key(config))

    def with_startup(self, config: ModelDeploymentConfig, seconds: float) -> FleetState:
        started = {**self.startup_seconds, startup_key(config): round(seconds, 3)}
        return self.model_copy(update={"startup_seconds": started})

    def with_capacity(self, name: str, capacity: ModelCapacity) -> FleetState:
        """`name`'s capacity recorded; its observed KV figures kept under its key too."""
        observed = dict(self.observed_capacity)
        if capacity.key and capacity.observed.kv_cache_tokens is not None:
            observed[capacity.key] = capacity.observed
        return self.model_copy(
            update={
                "capacity": {**self.capacity, name: capacity},
                "observed_capacity": observed,
            }
        )

    def next_app(self, name: str) -> AppName:
        return AppName(name, self.generations.get(name, 0) + 1)

    def aliases_of(self, name: str) -> tuple[str, ...]:
        return tuple(sorted(a for a, m in self.aliases.items() if m == name))

    def aliases_by_model(self) -> dict[str, tuple[str, ...]]:
        """Each model's aliases, sorted (domain/alias_map.py)."""
        return aliases_by_model(self.aliases)

    def with_generation(self, app: AppName) -> FleetState:
        generations = {
            **self.generations,
            app.model: max(app.generation, self.generations.get(app.model, 0)),
        }
        return self.model_copy(update={"generations": generations})

    def with_model(
        self,
        config: ModelDeploymentConfig,
        generation: int,
        entry: FleetModelEntry | None = None,
    ) -> FleetState:
        """`config` serving as `generation` (asked for as `entry`), its aliases pointing at
        it."""
        model = FleetModel(config=config, generation=generation, entry=entry)
        models = {**self.models, config.name: model}
        aliases = {**self.aliases, **dict.fromkeys(config.aliases, config.name)}
        return self.with_generation(AppName(config.name, generation)).model_copy(
            update={"models": models, "aliases": aliases}
        )

    def without_model(self, name: str) -> FleetState:
        """`name` gone with the aliases that pointed at it."""
        models = {n: m for n, m in self.models.items() if n != name}
        aliases = {a: m for a, m in self.aliases.items() if m != name}
        capacity = {n: c for n, c in self.capacity.items() if n != name}
        return self.model_copy(update={"models": models, "aliases": aliases, "capacity": capacity})

    def with_parked(self, name: str, asleep_level: Literal[1, 2] | None = None) -> FleetState:
        """`name` parked: kept with its config, entry and aliases; its engine gone, or
        asleep at `asleep_level` (its app still running)."""
        model = self.models[name].model_copy(update={"parked": True, "asleep_level": asleep_level})
        return self.model_copy(update={"models": {**self.models, name: model}})

    def with_woken(
        self,
        name: str,
        generation: int,
        wake_s: float | None,
        record: WakeRecord | None = None,
    ) -> FleetState:
        """`name` serving again as `generation` after a wake of `wake_s` seconds (None:
        not measured, the last wake's figure kept); `record` joins its wake history."""
        model = self.models[name]
        last = model.last_wake_s if wake_s is None else round(wake_s, 3)
        wakes = model.wakes if record is None else (*model.wakes, record)[-WAKE_HISTORY:]
        model = model.model_copy(
            update={
                "parked": False,
                "asleep_level": None,
                "generation": generation,
                "last_wake_s": last,
                "wakes": wakes,
            }
        )
        models = {**self.models, name: model}
        return self.with_generation(model.app).model_copy(update={"models": models})

    def with_entry(self, name: str, entry: FleetModelEntry) -> FleetState:
        """`name` as asked for by `entry` now (its residency keys), deployed as it was."""
        model = self.models[name].model_copy(update={"entry": entry})
        return self.model_copy(update={"models": {**self.models, name: model}})

    def with_alias(self, alias: str, name: str) -> FleetState:
        return self.model_copy(update={"aliases": {**self.aliases, alias: name}})


def startup_key(config: ModelDeploymentConfig) -> str:
    """What a start's duration depends on most: the weights and the layout."""
    return f"{config.source} {config.layout}"
