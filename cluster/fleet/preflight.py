"""Preflight of a new deployment: names, staging (once per operation) and admission.

A failure here changes nothing: the model directory it returns is what the deployment
then loads, so the weights are staged exactly once per operation. Admission may be asked
more than once for one staging (a swap asks whether NEW fits beside OLD, and else whether
it fits in what OLD frees).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cluster.fleet.admission_gate import auto_layout_of, decide, deployment_key
from cluster.fleet.deployment_resolution import resolve_deployment
from cluster.fleet.fleet_context import FleetContext
from cluster.fleet.operation_recorder import OperationRecorder
from cluster.inventory.policy_inventory import policy_inventory
from cluster.inventory.records import NodeFacts, ProbedCluster
from domain.accelerator_claims import summed_claims
from domain.accelerator_sharing import Tenant, free_for, node_tenants, shares_accelerators
from domain.deployment_config import ModelDeploymentConfig, PlannedPlacement
from domain.engine_capacity import CapacityFigures, ModelCapacity
from domain.fleet_state import FleetState
from domain.operation import AdmissionSummary
from domain.placement_plan import planned_placement
from domain.residency import ParkMode
from policies.admission import Candidate, Decision
from policies.engine_memory import MemoryTerm
from policies.inventory import ClusterInventory
from policies.reasons import Reason
from policies.sleep_mode import (
    PinnedWeights,
    level_one_refusals,
    pinned_per_node,
    sleep_mode_refusal,
)
from policies.units import GIB, gib


@dataclass(frozen=True)
class PreflightResult:
    model_dir: Path | None
    """The staged model (a config-only directory for a dry run); None if staging failed."""
    reasons: tuple[str, ...]
    """Why the deployment is refused; empty when admitted."""
    config: ModelDeploymentConfig | None = None
    """The config as it will be deployed (recipe applied, layout resolved), once resolved."""
    once_parked: bool = False
    """Admitted only counting the accelerators of the models named parkable as free."""

    @property
    def admitted(self) -> bool:
        return not self.reasons


@dataclass(frozen=True)
class Staged:
    """A model's weights on the node and the inventory admission decides against."""

    model_dir: Path
    inventory: ClusterInventory
    facts: tuple[NodeFacts, ...] = ()
    """The probed nodes behind `inventory` (their Ray ids and GPU kinds, for the placement)."""


def name_problems(
    state: FleetState, config: ModelDeploymentConfig, replacing: str | None = None
) -> list[str]:
    """Name clashes with the fleet; `replacing` (a swap's OLD) may be `config`'s own name."""
    problems = []
    if config.name in state.models and config.name != replacing:
        problems.append(f"a model named '{config.name}' already exists")
    for alias in config.aliases:
        if alias in state.models:
            problems.append(f"alias '{alias}' is the name of a model")
    return problems


def preflight(
    ctx: FleetContext,
    op: OperationRecorder,
    config: ModelDeploymentConfig,
    *,
    freed: Mapping[str, int] | None,
    dry_run: bool,
    auto_layout: bool = False,
    objective: str = "throughput",
    replacing: str | None = None,
    parkable: Mapping[str, int] | None = None,
    park_mode: ParkMode = ParkMode.UNLOAD,
    sleep_level: int = 1,
    parkable_models: frozenset[str] = frozenset(),
    asleep_after: frozenset[str] = frozenset(),
    gone: frozenset[str] = frozenset(),
) -> PreflightResult:
    """Stage `config`'s weights, resolve it (recipe, `layout: auto`) and run admission
    counting `freed` as free; `replacing` may be `config`'s own name (a wake). When that
    refuses and `parkable` (accelerators per node that on-demand models hold) is given,
    admission is asked again counting those free too: `once_parked` says it fits then.

    A model whose ranks share accelerators (domain/accelerator_sharing.py) is judged on the
    fleet's tenants instead: those in `asleep_after` put to sleep first, those in `gone`
    unloaded first, and on a refusal again with the `parkable_models` parked."""
    staged = stage_and_probe(
        ctx, op, config, dry_run=dry_run, replacing=replacing, park_mode=park_mode
    )
    if isinstance(staged, PreflightResult):
        return staged
    checked = _admit(
        ctx,
        op,
        config,
        staged,
        freed=freed,
        auto_layout=auto_layout,
        objective=objective,
        replacing=replacing,
        parkable=parkable,
        parkable_models=parkable_models,
        asleep_after=asleep_after,
        gone=gone,
    )
    if checked.admitted and park_mode is ParkMode.SLEEP and sleep_level == 1:
        assert checked.config is not None
        refused = level_one_host_refusals(ctx, checked.config, staged)
        if refused:
            ctx.metrics.admission(False, [r.split(":", 1)[0] for r in refused])
            return replace(checked, reasons=refused)
    return checked


def _admit(
    ctx: FleetContext,
    op: OperationRecorder,
    config: ModelDeploymentConfig,
    staged: Staged,
    *,
    freed: Mapping[str, int] | None,
    auto_layout: bool,
    objective: str,
    replacing: str | None,
    parkable: Mapping[str, int] | None,
    parkable_models: frozenset[str],
    asleep_after: frozenset[str],
    gone: frozenset[str],
) -> PreflightResult:
    """`preflight`'s admission on what `stage_and_probe` found (see there)."""
    if shares(ctx, config):
        return admit_shared(
            ctx,
            op,
            config,
            staged,
            auto_layout=auto_layout,
            objective=objective,
            exclude=replacing or config.name,
            asleep_after=asleep_after,
            gone=gone,
            parkable_models=parkable_models,
        )
    checked = _resolve_and_admit(ctx, op, config, staged, freed, auto_layout, objective)
    if checked.admitted or not parkable:
        return checked
    both = summed_claims((freed or {}, parkable))
    again = _resolve_and_admit(ctx, op, config, staged, both, auto_layout, objective)
    return replace(again, once_parked=True) if again.admitted else checked


def admit_shared(
    ctx: FleetContext,
    op: OperationRecorder,
    config: ModelDeploymentConfig,
    staged: Staged,
    *,
    exclude: str,
    asleep_after: frozenset[str],
    gone: frozenset[str],
    parkable_models: frozenset[str] = frozenset(),
    auto_layout: bool = False,
    objective: str = "throughput",
) -> PreflightResult:
    """`preflight`'s admission for a model that shares accelerators (see there), on what
    `stage_and_probe` found."""
    tenants = fleet_tenants(ctx, exclude=exclude)

    def judged(asleep: frozenset[str], unloaded: frozenset[str]) -> PreflightResult:
        inventory = shared_inventory(staged.inventory, tenants, asleep_after=asleep, gone=unloaded)
        shared_view = Staged(staged.model_dir, inventory, staged.facts)
        return _resolve_and_admit(ctx, op, config, shared_view, None, auto_layout, objective)

    checked = judged(asleep_after, gone)
    if checked.admitted or not parkable_models:
        return checked
    shares = {t.model: t.shared for node in tenants.values() for t in node}
    sleepers = frozenset(m for m in parkable_models if shares.get(m))
    again = judged(asleep_after | sleepers, gone | (parkable_models - sleepers))
    return replace(again, once_parked=True) if again.admitted else checked


def level_one_host_refusals(
    ctx: FleetContext, config: ModelDeploymentConfig, staged: Staged
) -> tuple[str, ...]:
    """`sleep_level: 1` pins the model's weights in the host memory of every node holding a
    rank; refused, with the figures, where that does not fit beside the fleet's other
    level-1 sleep-mode models, counted as if all were asleep at once (any may be parked)."""
    judged = verdict(config, staged, freed=None)
    if isinstance(judged, str) or not judged.candidates:
        return ()
    candidate = judged.candidates[0]
    by_name = {n.name: n for n in staged.inventory.nodes}
    ranks = config.layout.gpus_per_replica * config.replicas
    wanted = pinned_per_node(
        config.name,
        candidate.weights_bytes_per_gpu,
        {node: min(ranks, by_name[node].gpus) for node in candidate.nodes if node in by_name},
    )
    resource = ctx.settings.accelerator_resource
    asleep: list[PinnedWeights] = []
    for name, model in ctx.desired.state.models.items():
        entry = model.requested
        if name == config.name or entry.park_mode is not ParkMode.SLEEP or entry.sleep_level != 1:
            continue
        capacity = ctx.desired.state.capacity.get(name)
        gib_per_gpu = None if capacity is None else capacity.predicted.weights_gib
        if gib_per_gpu is None:
            continue
        claimed = ctx.ports.serve.claimed_by(model.app.app, resource)
        asleep.extend(pinned_per_node(name, int(gib_per_gpu * GIB), claimed))
    return tuple(str(r) for r in level_one_refusals(staged.inventory.nodes, wanted, asleep))


def shares(ctx: FleetContext, config: ModelDeploymentConfig) -> bool:
    """Whether `config`'s ranks take half an accelerator on this fleet's engines
    (domain/accelerator_sharing.py `shares_accelerators`)."""
    return shares_accelerators(config, stand_in_engine=ctx.settings.fake_engines is not None)


def fleet_tenants(ctx: FleetContext, *, exclude: str | None = None) -> dict[str, list[Tenant]]:
    """Per node, the fleet's engines holding accelerators there (serving, starting or
    asleep), but `exclude`."""
    resource = ctx.settings.accelerator_resource
    claims: dict[str, Mapping[str, int]] = {}
    shared: dict[str, bool] = {}
    awake: dict[str, bool] = {}
    for name, model in ctx.desired.state.models.items():
        if name == exclude or (model.parked and model.asleep_level is None):
            continue
        claims[name] = ctx.ports.serve.claimed_by(model.app.app, resource)
        shared[name] = shares(ctx, model.config)
        awake[name] = not model.parked
    return node_tenants(claims, shared, awake)


def shared_inventory(
    inventory: ClusterInventory,
    tenants: Mapping[str, list[Tenant]],
    *,
    asleep_after: frozenset[str],
    gone: frozenset[str],
) -> ClusterInventory:
    """`inventory` with each node's free accelerators as a sharing engine may count them."""
    nodes = []
    for node in inventory.nodes:
        present = [t for t in tenants.get(node.name, []) if t.model not in gone]
        free = free_for(node.gpus, present, shared=True, asleep_after=asleep_after)
        nodes.append(replace(node, free_gpus=min(node.gpus, free)))
    return ClusterInventory(nodes=tuple(nodes))


def _resolve_and_admit(
    ctx: FleetContext,
    op: OperationRecorder,
    config: ModelDeploymentConfig,
    staged: Staged,
    freed: Mapping[str, int] | None,
    auto_layout: bool,
    objective: str,
) -> PreflightResult:
    resolved = resolve(
        ctx, op, config, staged, freed=freed, auto_layout=auto_layout, objective=objective
    )
    if isinstance(resolved, tuple):
        return PreflightResult(staged.model_dir, resolved)
    judged = verdict(resolved, staged, freed=freed, observed=ctx.desired.state.observed_capacity)
    refused = record_admission(ctx, op, resolved, staged, judged)
    if refused:
        return PreflightResult(staged.model_dir, refused, resolved)
    placed = with_placement(ctx, op, resolved, judged, staged)
    if isinstance(placed, tuple):
        return PreflightResult(staged.model_dir, placed, resolved)
    return PreflightResult(staged.model_dir, (), placed)


def with_placement(
    ctx: FleetContext,
    op: OperationRecorder,
    config: ModelDeploymentConfig,
    judged: Verdict,
    staged: Staged,
) -> ModelDeploymentConfig | tuple[str, ...]:
    """`config` with the placement admission chose for it (`judged`, admitted): the nodes a
    replica spanning nodes is pinned to, and the GPU kind; the refusal where that placement
    cannot be deployed as planned (domain/placement_plan.py)."""
    if isinstance(judged, str) or not judged.candidates:
        return config
    candidate = judged.candidates[0]
    planned = planned_placement(
        config.layout,
        config.replicas,
        candidate.groups,
        {f.name: f.node_id for f in staged.facts},
        {f.name: f.ray_accelerator_type for f in staged.facts},
    )
    if isinstance(planned, str):
        ctx.metrics.admission(False, [planned.split(":", 1)[0]])
        return (planned,)
    if planned == PlannedPlacement():
        return config  # nothing to pin: Ray chooses, as without a plan
    if planned.rank_nodes:
        nodes = ", ".join(dict.fromkeys(n[:12] for n in planned.rank_nodes))
        op.note(f"{config.name}'s ranks pinned to the nodes admission placed them on: {nodes}")
    return config.model_copy(update={"placement": planned})


def resolve(
    ctx: FleetContext,
    op: OperationRecorder,
    config: ModelDeploymentConfig,
    staged: Staged,
    *,
    freed: Mapping[str, int] | None,
    auto_layout: bool,
    objective: str = "throughput",
) -> ModelDeploymentConfig | tuple[str, ...]:
    """`config` as it will be deployed: the architecture's recipe on the engine fields it
    leaves unset, and its layout the policy's recommendation when it asked for `auto`
    (counting `freed` as free); the refusals when the recipe or the policy refuse."""
    resolution = resolve_deployment(config, staged.model_dir)
    for note in resolution.notes:
        op.note(note)
    if resolution.refusals:
        ctx.metrics.admission(False, [r.split(":", 1)[0] for r in resolution.refusals])
        return resolution.refusals
    config = resolution.config
    if not auto_layout:
        return config
    try:
        decision = decide(
            staged.model_dir,
            config,
            staged.inventory,
            freed=freed,
            any_layout=True,
            objective=objective,
        )
    except ValueError as exc:
        return (str(exc),)
    chosen = auto_layout_of(decision, config.accelerator.kind)
    if chosen is None:
        return refusals(decision) or ("no recommended layout is deployable here",)
    op.note(f"layout auto: {chosen} (admission's recommendation for {objective})")
    op.details.layout = str(chosen)
    return config.model_copy(update={"layout": chosen})


def stage_and_probe(
    ctx: FleetContext,
    op: OperationRecorder,
    config: ModelDeploymentConfig,
    *,
    dry_run: bool,
    replacing: str | None = None,
    park_mode: ParkMode = ParkMode.UNLOAD,
) -> Staged | PreflightResult:
    """Names checked, weights staged (a dry run reads the config only), nodes probed; a
    PreflightResult with the reasons when any of it refuses (the park mode included)."""
    problems = name_problems(ctx.desired.state, config, replacing)
    if problems:
        ctx.metrics.admission(False, ["name_conflict"])
        return PreflightResult(None, tuple(problems))
    nodes = ctx.ports.nodes
    try:
        if dry_run:
            # A dry run must not download weights: the config (and the safetensors index
            # for sizes) is all admission needs.
            op.note(f"reading the config of {config.source}")
            model_dir = nodes.read_config(config.source)
        else:
            op.note(f"staging {config.source}")
            staged = nodes.stage(config.source)
            for node in staged.nodes:
                op.note(f"staged {config.source} on {node.describe()}")
                ctx.metrics.node_staging(node.node, node.outcome.value, node.downloaded_bytes)
            model_dir = staged.model_dir
    except Exception as exc:
        ctx.metrics.admission(False, ["staging_failed"])
        return PreflightResult(None, (f"staging {config.source} failed: {exc}",))
    probed = nodes.probe()
    for problem in probed.problems:
        op.note(f"inventory: {problem}")
    try:
        inventory = policy_inventory(
            probed.facts, probed.available, ctx.settings.accelerator, probed.totals
        )
    except ValueError as exc:  # no node with the fleet's accelerator kind
        return PreflightResult(model_dir, (f"inventory: {exc}",))
    refused = park_mode_refusals(
        park_mode, inventory, fake_engines=ctx.settings.fake_engines is not None
    )
    if refused:
        ctx.metrics.admission(False, [r.split(":", 1)[0] for r in refused])
        return PreflightResult(model_dir, refused)
    if dry_run:
        disk_problems = _dry_run_disk(ctx, op, config, probed)
        if disk_problems:
            return PreflightResult(model_dir, tuple(disk_problems))
    return Staged(model_dir, inventory, probed.facts)


def park_mode_refusals(
    park_mode: ParkMode, inventory: ClusterInventory, *, fake_engines: bool = False
) -> tuple[str, ...]:
    """`park_mode: sleep` refused where vLLM's engine has no sleep mode, naming the
    platform. The stand-in engine (`--fake-engines`) sleeps and wakes on every platform:
    the control plane's own path is tested with it."""
    if park_mode is not ParkMode.SLEEP or fake_engines:
        return ()
    for gpu, _ in inventory.pools():
        reason = sleep_mode_refusal(gpu)
        if reason is not None:
            return (str(reason),)
    return ()


Verdict = Decision | str
"""The policy's decision, or why it could not decide (an unsupported architecture, an
invalid config)."""


def verdict(
    config: ModelDeploymentConfig,
    staged: Staged,
    *,
    freed: Mapping[str, int] | None,
    observed: Mapping[str, CapacityFigures] | None = None,
) -> Verdict:
    """The policy on the staged inventory counting `freed` as free (reads the staged model's
    config and weight index once); `observed`: the fleet's logged KV figures by key."""
    try:
        return decide(staged.model_dir, config, staged.inventory, freed=freed, observed=observed)
    except ValueError as exc:
        return str(exc)


def refusals(judged: Verdict) -> tuple[str, ...]:
    """Why `judged` refuses; empty when admitted."""
    if isinstance(judged, str):
        return (judged,)
    if judged.admitted:
        return ()
    return _reasons(judged.reasons, judged.candidates[0] if judged.candidates else None)


def record_admission(
    ctx: FleetContext,
    op: OperationRecorder,
    config: ModelDeploymentConfig,
    staged: Staged,
    judged: Verdict,
) -> tuple[str, ...]:
    """`judged` as the operation's decision (metrics, details, progress); its refusals."""
    if isinstance(judged, str):
        ctx.metrics.admission(False, ["unsupported_model"])
        return (judged,)
    decision = judged
    candidate = decision.candidates[0] if decision.candidates else None
    codes = [r.code for r in decision.reasons]
    if not codes and candidate is not None and not decision.admitted:
        codes = [r.code for r in candidate.reasons]
    ctx.metrics.admission(decision.admitted, [] if decision.admitted else codes)
    op.details.admission = AdmissionSummary(
        admitted=decision.admitted,
        reasons=[str(r) for r in decision.reasons],
        layout=str(config.layout),
        candidate_reasons=[str(r) for r in candidate.reasons] if candidate else [],
        kv_source=candidate.kv_source.value if candidate else None,
    )
    if not decision.admitted:
        return refusals(decision)
    nodes = len(staged.inventory.nodes)
    if candidate is not None:
        op.details.predicted_capacity = ModelCapacity(
            predicted=predicted_figures(candidate),
            key=_key_digest(config, staged),
        )
        kv = f"{candidate.kv_cache_tokens:,} KV tokens per engine ({candidate.kv_source.value})"
        op.note(f"admitted {config.name} as {config.layout} ({nodes} nodes): {kv}")
    else:
        op.note(f"admitted {config.name} as {config.layout} ({nodes} nodes)")
    return ()


def predicted_figures(candidate: Candidate) -> CapacityFigures:
    """A candidate's figures as a `capacity` side (GiB per GPU of its limiting stage)."""
    graphs = candidate.memory_breakdown.get(MemoryTerm.CUDA_GRAPHS, 0)
    return CapacityFigures(
        weights_gib=round(gib(candidate.weights_bytes_per_gpu), 3),
        kv_cache_gib=round(gib(candidate.kv_cache_bytes), 3),
        kv_cache_tokens=candidate.kv_cache_tokens,
        cuda_graph_gib=round(gib(graphs), 3) if graphs else None,
    )


def _key_digest(config: ModelDeploymentConfig, staged: Staged) -> str:
    try:
        return deployment_key(config, staged.model_dir, staged.inventory).digest()
    except OSError:
        return ""


def _reasons(decision_reasons: Sequence[Reason], candidate: Candidate | None) -> tuple[str, ...]:
    # The decision's reasons summarise the candidates (one per code); fall back to the
    # candidate's own when the decision gives none.
    reasons = [str(r) for r in decision_reasons]
    if not reasons and candidate is not None:
        reasons = [str(r) for r in candidate.reasons]
    return tuple(reasons or ["the admission policy found no usable layout"])


def _dry_run_disk(
    ctx: FleetContext, op: OperationRecorder, config: ModelDeploymentConfig, probed: ProbedCluster
) -> list[str]:
    """Report the weights' real size and each node's disk verdict; the problems (nodes
    where staging would refuse) make the dry run a rejection, as the real run would be."""
    try:
        report = ctx.ports.nodes.weights_report(config.source, probed)
    except Exception as exc:
        return [f"cannot size {config.source}: {exc}"]
    op.details.weights = report.to_json()
    op.note(
        f"weights of {config.source}: {report.weight_bytes / 2**30:.2f} GiB in "
        f"{report.files} files ({report.total_bytes / 2**30:.2f} GiB in all)"
    )
    for verdict in report.verdicts:
        op.note(f"disk: {verdict.describe()}")
    return [f"disk_insufficient: {v.describe()}" for v in report.verdicts if not v.fits]
