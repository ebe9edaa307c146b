"""A fleet file's plan, judged step by step: what `diff` prints and `apply` checks first.

Each step of `domain/fleet_file_diff.py` is judged in order against the cluster as the steps
before it leave it: a remove frees its model's accelerators, an add or swap takes what its
layout needs. Every add and swap is resolved as an operation would resolve it (the recipe on
unset engine fields, `layout: auto` from the policy; cluster/fleet/deployment_resolution.py) and
admitted by the same policy. The live fleet (in the manager) and a described cluster (`diff
--from OLD -f NEW --inventory FILE`, no cluster running) use the same code through
`PlanSources`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cluster.fleet.admission_gate import auto_layout_of, decide
from cluster.fleet.deployment_resolution import resolve_deployment
from cluster.fleet.preflight import refusals
from domain.accelerator_claims import summed_claims
from domain.deployment_config import AcceleratorConfig, LayoutConfig, ModelDeploymentConfig
from domain.engine_capacity import CapacityFigures
from domain.fleet_file import FleetModelEntry
from domain.fleet_file_diff import ChangeAction, FleetChange, FleetDiff
from domain.placement_plan import planned_placement
from domain.residency import Demand, Residency, never_resident_together
from policies.admission import Decision
from policies.inventory import ClusterInventory

Claims = dict[str, int]
"""Accelerators per node."""


@dataclass(frozen=True)
class LiveModel:
    """A serving model as the plan sees it."""

    entry: FleetModelEntry
    config: ModelDeploymentConfig
    claimed: Claims


@dataclass(frozen=True)
class PlanSources:
    """Where a plan reads what it judges against."""

    model_dir: Callable[[str], Path]
    """A source's config (and weight index) directory; nothing downloaded but those."""
    inventory: ClusterInventory
    accelerator: AcceleratorConfig
    startup_of: Callable[[ModelDeploymentConfig], float | None] = lambda _config: None
    """A deployment's last start time, which a break-before-make hold lasts about."""
    observed: Mapping[str, CapacityFigures] = field(default_factory=dict)
    """KV sizes the fleet's engines logged, by `CapacityKey` digest (admission uses one for
    the very same deployment instead of the memory model)."""


@dataclass
class _Cluster:
    """Free accelerators per node as the steps so far leave them."""

    inventory: ClusterInventory
    on_demand: dict[str, Claims] = field(default_factory=dict)
    """What each resident on-demand model holds: a model added on demand may count it free
    (its first request's wake parks them), as `add` does."""

    def parkable(self, besides: str | None) -> Claims:
        return summed_claims(c for name, c in self.on_demand.items() if name != besides)

    def free(self, claims: Mapping[str, int]) -> None:
        self._adjust(claims, +1)

    def take(self, claims: Mapping[str, int]) -> None:
        self._adjust(claims, -1)

    def _adjust(self, claims: Mapping[str, int], sign: int) -> None:
        nodes = []
        for node in self.inventory.nodes:
            free = node.free_gpus + sign * claims.get(node.name, 0)
            nodes.append(replace(node, free_gpus=max(0, min(node.gpus, free))))
        self.inventory = ClusterInventory(nodes=tuple(nodes))


@dataclass
class PlannedStep:
    change: FleetChange
    admitted: bool = True
    reasons: list[str] = field(default_factory=list)
    layout: str | None = None
    accelerators: int = 0
    weights_gib: float | None = None
    engine: dict[str, Any] = field(default_factory=dict)
    recipe: list[str] = field(default_factory=list)
    strategy: str | None = None
    aliases: dict[str, str] = field(default_factory=dict)
    config: ModelDeploymentConfig | None = None
    """What an add or swap deploys, resolved."""
    kv_cache_tokens: int | None = None
    kv_source: str | None = None
    """Where the KV capacity admission judged came from: `model` or `observed`."""
    parked: bool = False
    """An on-demand add that fits only once the other on-demand models park: added parked."""

    def to_json(self) -> dict[str, Any]:
        c = self.change
        out: dict[str, Any] = {"action": c.action.value, "model": c.model}
        if c.action is ChangeAction.SWAP:
            out["replaces"] = c.replaces
            out["strategy"] = self.strategy
            if c.changed:
                out["changed"] = list(c.changed)
        if c.action is ChangeAction.ALIAS:
            out["alias"] = c.alias
        if c.action is ChangeAction.RESIDENCY:
            assert c.entry is not None
            out["changed"] = list(c.changed)
            out["residency"] = c.entry.residency_form()
        out["admitted"] = self.admitted
        out["reasons"] = self.reasons
        if c.action in (ChangeAction.ADD, ChangeAction.SWAP):
            out.update(
                layout=self.layout,
                accelerators=self.accelerators,
                disk={"weights_gib": self.weights_gib},
                engine=self.engine,
                recipe=self.recipe,
                capacity={"kv_cache_tokens": self.kv_cache_tokens, "kv_source": self.kv_source},
            )
        if c.action is ChangeAction.ADD:
            out["parked"] = self.parked
        out["aliases"] = self.aliases
        return out


@dataclass(frozen=True)
class FleetPlan:
    steps: tuple[PlannedStep, ...]
    left_aliases: tuple[str, ...] = ()
    never_together: tuple[tuple[str, str], ...] = ()
    """On-demand models of the resulting fleet that can never be resident at once."""

    @property
    def admitted(self) -> bool:
        return all(s.admitted for s in self.steps)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "changes": [s.to_json() for s in self.steps],
            "admitted": self.admitted,
        }
        if self.left_aliases:
            out["left_aliases"] = list(self.left_aliases)
        if self.never_together:
            out["never_resident_together"] = [list(pair) for pair in self.never_together]
        return out


def plan_fleet(
    diff: FleetDiff,
    live: Mapping[str, LiveModel],
    live_aliases: Mapping[str, str],
    sources: PlanSources,
) -> FleetPlan:
    """Judge each step of `diff` in order (see the module docstring)."""
    cluster = _Cluster(sources.inventory)
    cluster.on_demand = {
        name: model.claimed
        for name, model in live.items()
        if model.entry.residency is Residency.ON_DEMAND and model.claimed
    }
    fleet = {name: _demand(model.entry, model.config) for name, model in live.items()}
    steps = []
    for change in diff.changes:
        step = PlannedStep(change)
        owned = sorted({a for a, m in live_aliases.items() if m == (change.replaces or "")})
        if change.action is ChangeAction.REMOVE:
            cluster.free(live[change.model].claimed)
            cluster.on_demand.pop(change.model, None)
            fleet.pop(change.model, None)
            gone = [a for a, m in sorted(live_aliases.items()) if m == change.model]
            step.aliases = dict.fromkeys([change.model, *gone], "removed: answered 404")
        elif change.action is ChangeAction.ALIAS:
            assert change.alias is not None
            step.aliases = {change.alias: f"moves to {change.model} at once"}
        elif change.action is ChangeAction.RESIDENCY:
            # Recorded only: nothing is deployed, nothing to admit.
            assert change.entry is not None
            fleet[change.model] = replace(fleet[change.model], residency=change.entry.residency)
        else:
            assert change.entry is not None
            old = live.get(change.replaces or "")
            claims = _judge(step, change.entry, old, cluster, sources)
            if change.replaces is not None:
                cluster.on_demand.pop(change.replaces, None)
                fleet.pop(change.replaces, None)
            if step.admitted and step.config is not None:
                fleet[change.model] = _demand(change.entry, step.config)
                if claims and change.entry.residency is Residency.ON_DEMAND:
                    cluster.on_demand[change.model] = claims
            if change.action is ChangeAction.SWAP:
                held = _held_for(step, sources)
                moving = [*owned, *([change.model] if change.replaces == change.model else [])]
                step.aliases = dict.fromkeys(sorted(set(moving)), held)
            step.aliases.update({a: "new" for a in change.entry.aliases if a not in step.aliases})
        steps.append(step)
    accelerators = sum(node.gpus for node in sources.inventory.nodes)
    apart = never_resident_together(fleet.values(), accelerators)
    return FleetPlan(tuple(steps), diff.left_aliases, tuple(apart))


def _demand(entry: FleetModelEntry, config: ModelDeploymentConfig) -> Demand:
    return Demand(entry.name, entry.residency, config.layout.gpus_per_replica * config.replicas)


@dataclass(frozen=True)
class DescribedFleet:
    """A fleet file as if deployed (the OLD of `diff --from`)."""

    live: dict[str, LiveModel]
    aliases: dict[str, str]
    sources: PlanSources
    """The sources with the inventory it leaves: its accelerators taken."""
    problems: list[str]
    """The entries that would not be admitted, and why."""


def deploy_all(entries: tuple[FleetModelEntry, ...], sources: PlanSources) -> DescribedFleet:
    """A described fleet as if deployed on `sources.inventory`: each entry resolved and
    placed in order."""
    cluster = _Cluster(sources.inventory)
    live: dict[str, LiveModel] = {}
    problems = []
    for entry in entries:
        step = PlannedStep(FleetChange(ChangeAction.ADD, entry.name, entry=entry))
        claims = _judge(step, entry, None, cluster, sources)
        if not step.admitted or step.config is None:
            problems.append(f"{entry.name}: {'; '.join(step.reasons)}")
            continue
        if claims and entry.residency is Residency.ON_DEMAND:
            cluster.on_demand[entry.name] = claims
        live[entry.name] = LiveModel(entry, step.config, claims)
    aliases = {a: e.name for e in entries if e.name in live for a in e.aliases}
    return DescribedFleet(live, aliases, replace(sources, inventory=cluster.inventory), problems)


def _judge(
    step: PlannedStep,
    entry: FleetModelEntry,
    old: LiveModel | None,
    cluster: _Cluster,
    sources: PlanSources,
) -> Claims:
    """Resolve and admit `entry` (replacing `old`, if any) on what `cluster` has free; take
    what it claims. The claims taken (empty when refused, or added parked)."""
    config = entry.deployment()
    config = config.model_copy(update={"accelerator": sources.accelerator})
    if sources.accelerator.kind == "cpu" and "enforce_eager" not in entry.engine.model_fields_set:
        config = config.model_copy(
            update={"engine": config.engine.model_copy(update={"enforce_eager": True})}
        )
    try:
        model_dir = sources.model_dir(entry.source)
    except Exception as exc:
        return _refuse(step, f"cannot read the config of {entry.source}: {exc}")
    resolution = resolve_deployment(config, model_dir)
    step.recipe = list(resolution.notes)
    if resolution.refusals:
        return _refuse(step, *resolution.refusals)
    judged = _admit(entry, resolution.config, model_dir, cluster.inventory, old, sources)
    refused = isinstance(judged, tuple) or not judged.decision.admitted
    if refused and old is None and entry.residency is Residency.ON_DEMAND:
        parkable = cluster.parkable(besides=entry.name)
        once_parked = (
            _admit(entry, resolution.config, model_dir, cluster.inventory, None, sources, parkable)
            if parkable
            else ()
        )
        if isinstance(once_parked, _Admitted) and once_parked.decision.admitted:
            # Added parked, as `add` does: it takes nothing until a request wakes it.
            _describe(step, once_parked)
            step.parked = True
            return {}
    if isinstance(judged, tuple):
        return _refuse(step, *judged)
    _describe(step, judged)
    if old is not None:
        step.strategy = "make-before-break" if judged.beside else "break-before-make"
    decision, config = judged.decision, judged.config
    if not decision.admitted:
        return _refuse(step, *refusals(decision))
    undeployable = _placement_refusal(config, decision)
    if undeployable is not None:
        return _refuse(step, undeployable)
    if old is not None:
        cluster.free(old.claimed)
    claims = _claims(decision, config.layout, config.replicas, cluster.inventory)
    cluster.take(claims)
    return claims


def _placement_refusal(config: ModelDeploymentConfig, decision: Decision) -> str | None:
    """Why admission's placement could not be deployed as planned (as `apply`'s preflight
    refuses it, domain/placement_plan.py); the plan names nodes, not Ray's ids."""
    if not decision.candidates:
        return None
    groups = decision.candidates[0].groups
    names = {n: n for group in groups for n in group}
    planned = planned_placement(config.layout, config.replicas, groups, names, {})
    return planned if isinstance(planned, str) else None


@dataclass(frozen=True)
class _Admitted:
    """A step's config as it will deploy (its `layout: auto` resolved) and the policy's
    decision on it; `beside`: it fits beside the model it replaces."""

    config: ModelDeploymentConfig
    decision: Decision
    beside: bool = False


def _admit(
    entry: FleetModelEntry,
    config: ModelDeploymentConfig,
    model_dir: Path,
    inventory: ClusterInventory,
    old: LiveModel | None,
    sources: PlanSources,
    parkable: Claims | None = None,
) -> _Admitted | tuple[str, ...]:
    """The policy on `config` counting free what `old` holds (or `parkable`); the refusals
    when no layout could even be chosen."""
    freed = old.claimed if old is not None else parkable
    seen = sources.observed
    try:
        if entry.auto_layout:
            recommended = decide(
                model_dir,
                config,
                inventory,
                freed=freed,
                any_layout=True,
                objective=entry.objective,
            )
            layout = auto_layout_of(recommended, sources.accelerator.kind)
            if layout is None:
                return refusals(recommended)
            config = config.model_copy(update={"layout": layout})
        if old is not None:
            beside = decide(model_dir, config, inventory, observed=seen)
            if beside.admitted:
                return _Admitted(config, beside, beside=True)
        return _Admitted(config, decide(model_dir, config, inventory, freed=freed, observed=seen))
    except ValueError as exc:
        return (str(exc),)


def _describe(step: PlannedStep, judged: _Admitted) -> None:
    config, decision = judged.config, judged.decision
    step.config = config
    step.layout = str(config.layout)
    step.accelerators = config.layout.gpus_per_replica * config.replicas
    step.weights_gib = round(decision.weights.total_bytes / 2**30, 3)
    if decision.candidates:
        first = decision.candidates[0]
        step.kv_cache_tokens, step.kv_source = first.kv_cache_tokens, first.kv_source.value
    step.engine = config.engine.model_dump(mode="json", exclude_none=True, exclude={"extra"})
    step.engine.update(config.engine.extra)


def _claims(
    decision: Decision, layout: LayoutConfig, replicas: int, inventory: ClusterInventory
) -> Claims:
    """Where the admitted layout's accelerators come from: the candidate's nodes, in order."""
    candidate = decision.recommended or decision.candidates[0]
    need = layout.gpus_per_replica * replicas
    free = {n.name: n.free_gpus for n in inventory.nodes}
    claims: Claims = {}
    for node in candidate.nodes or tuple(free):
        take = min(need, free.get(node, 0))
        if take:
            claims[node] = take
            need -= take
    return claims


def _refuse(step: PlannedStep, *reasons: str) -> Claims:
    step.admitted = False
    step.reasons.extend(reasons or ("refused",))
    return {}


def _held_for(step: PlannedStep, sources: PlanSources) -> str:
    if not step.admitted or step.config is None:
        return "nothing changes (refused)"
    if step.strategy == "make-before-break":
        return "nothing: moves at once (make-before-break)"
    seconds = sources.startup_of(step.config)
    if seconds is None:
        return "held while NEW starts (no earlier start of this source and layout to go by)"
    return f"held for about {seconds:.0f} s (break-before-make)"
