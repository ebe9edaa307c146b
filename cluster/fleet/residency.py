"""Parking and waking a model: its engine unloaded to free its accelerators, and brought back.

A parked model stays in the fleet: its name, config, aliases and routes are kept, `/v1/models`
lists it, and its weights stay pinned on the nodes (the fleet's models, parked ones included,
are what `release` keeps). Park mode `unload` is the only one: the engine's Serve app is
deleted, and a wake is a cold start under the next app generation.

- park: `draining` (the route stops taking requests; those in flight finish up to the drain
  deadline), `removing_old` (the app is deleted until its accelerators are free), then the
  route is PARKED and the fleet records the model parked.
- wake: `preflight` (the weights staged and read into the page cache, admission against the
  accelerators free now: a wake that does not fit changes nothing), `deploying_new` (the
  route is WAKING while the next generation starts and is warmed), then READY.

After a restart (cluster/fleet/reconcile.py): a park interrupted while draining is undone
(the model serves on, READY); one interrupted later is completed. A wake whose app runs is
completed; any other is undone (its app deleted, the model parked as before).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from cluster.fleet.bring_up import bring_up
from cluster.fleet.fleet_context import FleetContext, model_route
from cluster.fleet.operation_recorder import OperationRecorder
from cluster.fleet.ports import AppStatus, DeployFailed
from cluster.fleet.preflight import (
    PreflightResult,
    admit_shared,
    fleet_tenants,
    preflight,
    shares,
    stage_and_probe,
)
from cluster.fleet.swap_flow import drain
from cluster.inventory.policy_inventory import policy_inventory
from domain.accelerator_claims import summed_claims
from domain.accelerator_sharing import Tenant, awake_beside
from domain.app_name import AppName
from domain.fleet_state import FleetModel, WakeRecord
from domain.model_state import ModelState
from domain.operation import (
    OperationDetails,
    OperationKind,
    OperationResult,
    Outcome,
    SwapPhase,
    now,
)
from domain.operation_request import WakeTrigger
from domain.residency import ParkMode, ParkReason, ResidentModel, eviction_order
from policies.units import GIB
from policies.wake_paths import PastWake, WakeEstimate, WakeLinks, WakePath, WakeWork, estimate

Begin = Callable[[OperationKind, OperationDetails], OperationRecorder]

CAPACITY_BUSY = "capacity_busy"
"""The gateway's error code for requests whose model could not be woken: the accelerators
it needs are taken."""


def park(
    ctx: FleetContext, begin: Begin, name: str, reason: ParkReason = ParkReason.MANUAL
) -> OperationResult:
    """Drain `name` and unload its engine; its routes and aliases stay (see the module).
    Parked by hand, new requests get 503 while it drains; parked when idle, they are held
    and wake it again."""
    model = ctx.desired.model(name)
    details = OperationDetails(
        name=name,
        generation=None if model is None else model.generation,
        park_reason=reason,
    )
    op = begin(OperationKind.PARK, details)
    if model is None:
        return op.end(Outcome.REJECTED, f"no model named '{name}'")
    if model.parked:
        return op.end(Outcome.DONE, f"{name} is already parked; nothing changed")
    hold = reason is not ParkReason.MANUAL
    level = sleep_level_of(model)
    # Parked for room, a model must give its accelerators back: it is unloaded.
    if level is not None and reason is not ParkReason.EVICTED:
        asleep = put_to_sleep(ctx, op, model, level, hold_requests=hold)
        ctx.metrics.parked(name, reason.value)
        if asleep:
            return op.end(
                Outcome.DONE,
                f"{name} is asleep at level {level} ({reason.value}): its engine keeps its "
                "accelerators, and a wake needs no cold start",
            )
        return op.end(Outcome.DONE, f"{name} is parked ({reason.value}), unloaded: see notes")
    unload(ctx, op, model, hold_requests=hold)
    ctx.metrics.parked(name, reason.value)
    return op.end(Outcome.DONE, f"{name} is parked ({reason.value}): its accelerators are free")


def sleep_level_of(model: FleetModel) -> Literal[1, 2] | None:
    """The level `model` sleeps at when parked (None: it parks by unloading)."""
    entry = model.requested
    return entry.sleep_level if entry.park_mode is ParkMode.SLEEP else None


def put_to_sleep(
    ctx: FleetContext,
    op: OperationRecorder,
    model: FleetModel,
    level: Literal[1, 2],
    *,
    hold_requests: bool,
) -> bool:
    """Drain `model`, then put every replica of its engine to sleep at `level`. Its app
    and accelerators stay. When a replica will not sleep, the model is unloaded instead
    (False): a half-asleep engine serves nobody."""
    name = model.config.name
    # Drained first: Ray Serve LLM's sleep passes no pause mode, and vLLM's default aborts
    # the requests in flight.
    drain_for_park(ctx, op, model, hold_requests=hold_requests)
    op.phase(SwapPhase.SLEEPING, f"putting {model.app} to sleep at level {level}")
    try:
        ctx.ports.serve.sleep(model.app, level)
    except DeployFailed as exc:
        op.note(f"{name} would not sleep ({exc}); unloading it instead")
        op.phase(SwapPhase.REMOVING_OLD, f"unloading {model.app}")
        complete_park(ctx, name)
        return False
    complete_sleep(ctx, name, level)
    return True


def complete_sleep(ctx: FleetContext, name: str, level: Literal[1, 2]) -> None:
    """Every replica asleep: the route PARKED, the model recorded asleep at `level`."""
    model = ctx.desired.model(name)
    assert model is not None
    ctx.desired.update(ctx.desired.state.with_parked(name, asleep_level=level))
    publish_parked(ctx, ctx.desired.model(name) or model)


def unload(
    ctx: FleetContext, op: OperationRecorder, model: FleetModel, *, hold_requests: bool
) -> None:
    """Drain `model`, then park it, its engine unloaded."""
    drain_for_park(ctx, op, model, hold_requests=hold_requests)
    op.phase(SwapPhase.REMOVING_OLD, f"unloading {model.app}")
    complete_park(ctx, model.config.name)


def drain_for_park(
    ctx: FleetContext, op: OperationRecorder, model: FleetModel, *, hold_requests: bool
) -> None:
    """Stop sending `model` new requests (refused with 503, or held to wake it again when
    `hold_requests`) and wait for those in flight."""
    name = model.config.name
    op.phase(SwapPhase.DRAINING, f"draining {model.app}: its requests in flight finish on it")
    if hold_requests:
        publish_parked(ctx, model)
    else:
        ctx.ports.routes.set_route_state(name, ModelState.DRAINING)
    left = drain(ctx, model.app.app)
    op.note(f"{name} drained ({left} requests still in flight at the deadline)")


def complete_park(ctx: FleetContext, name: str) -> None:
    """The app deleted (idempotent), the route PARKED, the model recorded parked."""
    model = ctx.desired.model(name)
    assert model is not None
    ctx.ports.serve.delete(model.app.app)
    publish_parked(ctx, model)
    ctx.desired.update(ctx.desired.state.with_parked(name))


def predicted_wake_s(ctx: FleetContext, model: FleetModel) -> float | None:
    """How long `model`'s next wake should take: from sleep, the path's prediction
    (`wake_estimate`); unloaded, a cold start: its last wake, else the last start of its
    source and layout."""
    if model.asleep_level is not None:
        return wake_estimate(ctx, model).predicted_s
    if model.last_wake_s is not None:
        return model.last_wake_s
    return ctx.desired.state.startup_of(model.config)


def wake_estimate(ctx: FleetContext, model: FleetModel) -> WakeEstimate:
    """The wake of `model` from its sleep level, predicted from the bytes it moves (its
    weights per GPU, as its engine logged them or admission predicted; every replica's
    ranks counted on one node, the upper bound) and corrected by its own past wakes."""
    capacity = ctx.desired.state.capacity.get(model.config.name)
    weights_gib = 0.0
    if capacity is not None:
        weights_gib = capacity.observed.weights_gib or capacity.predicted.weights_gib or 0.0
    per_gpu = int(weights_gib * GIB)
    ranks = model.config.layout.gpus_per_replica * model.config.replicas
    work = WakeWork(weights_per_gpu_bytes=per_gpu, busiest_node_bytes=per_gpu * ranks)
    path = WakePath.LEVEL_1 if model.asleep_level == 1 else WakePath.LEVEL_2
    history = [PastWake(WakePath(w.path), w.physics_s, w.measured_s) for w in model.wakes]
    return estimate(path, work, WakeLinks(), history)


def publish_parked(
    ctx: FleetContext,
    model: FleetModel,
    *,
    error: str | None = None,
    error_code: str | None = None,
    wake_ended: bool = False,
) -> None:
    """`model`'s route PARKED, with its predicted wake; `wake_ended`: a wake of it just
    ended without serving it (the gateways holding requests for it then refuse them, with
    `error`)."""
    published = ctx.ports.routes.routing_table().models.get(model.config.name)
    ended = published.wakes_ended if published is not None else 0
    route = replace(
        model_route(model.app, model.config, ModelState.PARKED),
        error=error,
        error_code=error_code,
        wake_s=predicted_wake_s(ctx, model),
        wakes_ended=ended + 1 if wake_ended else ended,
    )
    ctx.ports.routes.put_route(route)


def wake(
    ctx: FleetContext, begin: Begin, name: str, trigger: WakeTrigger = WakeTrigger.MANUAL
) -> OperationResult:
    """Bring parked `name` back under its next app generation (see the module)."""
    state = ctx.desired.state
    model = state.models.get(name)
    app = state.next_app(name)
    op = begin(
        OperationKind.WAKE,
        OperationDetails(name=name, generation=app.generation, trigger=trigger),
    )
    if model is None:
        return op.end(Outcome.REJECTED, f"no model named '{name}'")
    if not model.parked:
        return op.end(Outcome.DONE, f"{name} is not parked; nothing changed")
    started = ctx.clock.monotonic()

    def ended(outcome: Outcome, message: str, seconds: float | None = None) -> OperationResult:
        mode = model.requested.park_mode.value
        ctx.metrics.woken(name, mode, trigger.value, outcome.value, seconds)
        return op.end(outcome, message)

    if model.asleep_level is not None:
        op.details.generation = model.generation
        return _wake_from_sleep(ctx, op, model, started, ended)

    op.phase(SwapPhase.PREFLIGHT, f"admission for {name} on the accelerators free now")
    checked = preflight(ctx, op, model.config, freed=None, dry_run=False, replacing=name)
    room = Room()
    if not checked.admitted and op.details.admission is not None:
        # Admission judged the accelerators free now: the others hold them. Park on-demand
        # models, least recently used first, if that makes room.
        room = _room_for(ctx, op, model)
        checked = room.admitted or checked
    if not checked.admitted:
        why = "not admitted: " + "; ".join(checked.reasons)
        judged = op.details.admission is not None
        publish_parked(
            ctx,
            model,
            error=why + (" (no on-demand model can be parked to make room)" if judged else ""),
            error_code=CAPACITY_BUSY if judged else None,
            wake_ended=True,
        )
        return ended(Outcome.REJECTED, f"{name} stays parked: {why}")
    assert checked.model_dir is not None
    if room.evicted:
        op.decide(evicted=[victim.config.name for victim in room.evicted])
        for victim in room.evicted:
            level = sleep_level_of(victim)
            if victim.config.name in room.to_sleep and level is not None:
                op.note(f"putting {victim.config.name} to sleep to make room (least recently used)")
                if not put_to_sleep(ctx, op, victim, level, hold_requests=True):
                    unloaded = _ray_freed(ctx, [victim])
                    room = replace(room, freed=summed_claims((room.freed, unloaded)))
            else:
                op.note(f"parking {victim.config.name} to make room (least recently used)")
                unload(ctx, op, victim, hold_requests=True)
            ctx.metrics.parked(victim.config.name, ParkReason.EVICTED.value)
        resource = ctx.settings.accelerator_resource
        if not ctx.ports.serve.wait_freed(room.freed, resource, ctx.settings.free_timeout_s):
            op.note("the accelerators were not all seen free in time; starting anyway")
    # Before the start: a load from memory makes the cold start shorter.
    op.note(ctx.ports.nodes.prefetch(checked.model_dir).describe())
    op.phase(SwapPhase.DEPLOYING_NEW, f"starting {name} as {app}")
    predicted = predicted_wake_s(ctx, model)
    left = None if predicted is None else max(0.0, predicted - (ctx.clock.monotonic() - started))
    published = ctx.ports.routes.routing_table().models.get(name)
    waking = replace(
        published or model_route(model.app, model.config, ModelState.PARKED),
        state=ModelState.WAKING,
        error=None,
        error_code=None,
        ready_by=None if left is None else now() + left,
    )
    ctx.ports.routes.put_route(waking)
    try:
        bring_up(ctx, app, model.config, checked.model_dir, op, routed=False)
    except DeployFailed as exc:
        publish_parked(ctx, model, error=f"its engine failed to start: {exc}", wake_ended=True)
        return ended(Outcome.FAILED, f"{name} failed to wake and stays parked: {exc}")
    seconds = ctx.clock.monotonic() - started
    if predicted is not None:
        ctx.metrics.wake_predicted(name, WakePath.COLD_START.value, predicted, seconds)
    complete_wake(ctx, name, app, seconds)
    return ended(Outcome.DONE, f"{name} is serving again ({seconds:.1f} s)", seconds)


def _wake_from_sleep(
    ctx: FleetContext,
    op: OperationRecorder,
    model: FleetModel,
    started: float,
    ended: Callable[..., OperationResult],
) -> OperationResult:
    """Wake every replica of `model`'s engine where it sleeps: no admission (it holds its
    accelerators), no new generation. A level-2 wake reads the weights into the page cache
    first. An engine that will not wake is unloaded, and the model stays parked for a cold
    start."""
    name, level = model.config.name, model.asleep_level
    assert level is not None
    beside = _awake_beside(ctx, model)
    if beside is None:
        why = (
            "the engines awake on its accelerators cannot be put to sleep (no on-demand "
            "model sharing them can be parked to make room)"
        )
        publish_parked(ctx, model, error=why, error_code=CAPACITY_BUSY, wake_ended=True)
        return ended(Outcome.REJECTED, f"{name} stays asleep: {why}")
    for other in beside:
        neighbour = ctx.desired.model(other)
        other_level = None if neighbour is None else sleep_level_of(neighbour)
        if neighbour is None or other_level is None:
            continue
        op.note(f"putting {other} to sleep: it is awake on {name}'s accelerators")
        if not put_to_sleep(ctx, op, neighbour, other_level, hold_requests=True):
            resource = ctx.settings.accelerator_resource
            freed = _ray_freed(ctx, [neighbour])
            ctx.ports.serve.wait_freed(freed, resource, ctx.settings.free_timeout_s)
        ctx.metrics.parked(other, ParkReason.EVICTED.value)
    predicted = wake_estimate(ctx, model)
    # The prediction is of the wake alone, published as the route's `ready_by` from here:
    # it is measured from here too, not from the operation's start (the neighbours' sleep
    # before it is their drain, not a cost of this path).
    waking_since = ctx.clock.monotonic()
    op.phase(SwapPhase.WAKING, f"waking {model.app} from level-{level} sleep")
    op.note(f"{predicted.path.value} wake predicted to take {predicted.predicted_s:.1f} s")
    published = ctx.ports.routes.routing_table().models.get(name)
    ctx.ports.routes.put_route(
        replace(
            published or model_route(model.app, model.config, ModelState.PARKED),
            state=ModelState.WAKING,
            error=None,
            error_code=None,
            ready_by=now() + predicted.predicted_s,
        )
    )
    try:
        if level == 2:
            staged = ctx.ports.nodes.stage(model.config.source)
            op.note(ctx.ports.nodes.prefetch(staged.model_dir).describe())
        ctx.ports.serve.wake(model.app, level)
        ctx.ports.serve.warm_up(model.app, ctx.settings.deploy_timeout_s)
    except DeployFailed as exc:
        op.note(f"{name}'s engine would not wake ({exc}); unloading it")
        complete_park(ctx, name)
        parked = ctx.desired.model(name) or model
        publish_parked(ctx, parked, error=f"its engine failed to wake: {exc}", wake_ended=True)
        return ended(Outcome.FAILED, f"{name} failed to wake and stays parked, unloaded: {exc}")
    woken_at = ctx.clock.monotonic()
    seconds = woken_at - started
    woke_s = woken_at - waking_since
    record = WakeRecord(
        path=predicted.path.value, physics_s=predicted.physics_s, measured_s=round(woke_s, 3)
    )
    ctx.metrics.wake_predicted(name, predicted.path.value, predicted.predicted_s, woke_s)
    complete_wake(ctx, name, model.app, seconds, record)
    return ended(
        Outcome.DONE,
        f"{name} is serving again ({seconds:.1f} s; its {predicted.path.value} wake "
        f"{woke_s:.1f} s, {predicted.predicted_s:.1f} s predicted)",
        seconds,
    )


def _awake_beside(ctx: FleetContext, model: FleetModel) -> tuple[str, ...] | None:
    """The engines awake on `model`'s accelerators that must sleep before it wakes there,
    least recently used first (see `awake_beside`); None when that cannot make room."""
    if not shares(ctx, model.config):
        return ()  # a whole-accelerator engine asleep keeps its accelerators to itself
    resource = ctx.settings.accelerator_resource
    probed = ctx.ports.nodes.probe()
    inventory = policy_inventory(
        probed.facts, probed.available, ctx.settings.accelerator, probed.totals
    )
    gpus = {node.name: node.gpus for node in inventory.nodes}
    tenants = fleet_tenants(ctx)
    evictable = eviction_order(resident_models(ctx), waking=model.config.name)
    chosen: list[str] = []
    for node, ranks in ctx.ports.serve.claimed_by(model.app.app, resource).items():
        waking = Tenant(model.config.name, ranks, shared=True, awake=True)
        found = awake_beside(gpus.get(node, 0), tenants.get(node, []), waking, evictable)
        if found is None:
            return None
        chosen.extend(m for m in found if m not in chosen)
    return tuple(chosen)


@dataclass(frozen=True)
class Room:
    """Models to park so a wake fits: the accelerators they hold (per node) and the
    admission that counted them free; empty when no set of them makes room."""

    evicted: tuple[FleetModel, ...] = ()
    freed: dict[str, int] = field(default_factory=dict)
    admitted: PreflightResult | None = None
    to_sleep: frozenset[str] = frozenset()
    """Those of `evicted` put to sleep rather than unloaded: engines sharing the
    accelerators with the woken model (domain/accelerator_sharing.py)."""


def _room_for(ctx: FleetContext, op: OperationRecorder, model: FleetModel) -> Room:
    """The fewest on-demand models, least recently used first, whose accelerators would let
    admission place `model` (see `Room`)."""
    order = eviction_order(resident_models(ctx), waking=model.config.name)
    if shares(ctx, model.config):
        return _room_to_share(ctx, op, model, order)
    state = ctx.desired.state
    resource = ctx.settings.accelerator_resource
    freed: dict[str, int] = {}
    chosen: list[FleetModel] = []
    for name in order:
        victim = state.models[name]
        freed = summed_claims((freed, ctx.ports.serve.claimed_by(victim.app.app, resource)))
        chosen.append(victim)
        checked = preflight(
            ctx, op, model.config, freed=freed, dry_run=False, replacing=model.config.name
        )
        if checked.admitted:
            return Room(tuple(chosen), freed, checked)
    return Room()


def _room_to_share(
    ctx: FleetContext, op: OperationRecorder, model: FleetModel, order: list[str]
) -> Room:
    """`_room_for` a model sharing accelerators: an awake engine that shares them too is
    put to sleep (its half stays), any other (or one asleep already) is unloaded."""
    state = ctx.desired.state
    name_of = model.config.name
    # Staged and probed once: each set of victims is only another admission.
    staged = stage_and_probe(ctx, op, model.config, dry_run=False, replacing=name_of)
    if isinstance(staged, PreflightResult):
        return Room()
    asleep: set[str] = set()
    gone: set[str] = set()
    chosen: list[FleetModel] = []
    for name in order:
        victim = state.models[name]
        if shares(ctx, victim.config) and not victim.parked:
            asleep.add(name)
        else:
            gone.add(name)
        chosen.append(victim)
        checked = admit_shared(
            ctx,
            op,
            model.config,
            staged,
            exclude=name_of,
            asleep_after=frozenset(asleep),
            gone=frozenset(gone),
        )
        if checked.admitted:
            freed = _ray_freed(ctx, [v for v in chosen if v.config.name in gone])
            return Room(tuple(chosen), freed, checked, frozenset(asleep))
    return Room()


def _ray_freed(ctx: FleetContext, unloaded: list[FleetModel]) -> dict[str, int]:
    """What unloading `unloaded` gives back to Ray per node, in whole accelerators."""
    resource = ctx.settings.accelerator_resource
    freed: dict[str, int] = {}
    for victim in unloaded:
        for node, ranks in ctx.ports.serve.claimed_by(victim.app.app, resource).items():
            units = ranks // 2 if shares(ctx, victim.config) else ranks
            freed[node] = freed.get(node, 0) + units
    return freed


def resident_models(ctx: FleetContext) -> list[ResidentModel]:
    """The fleet as its residency rules see it now (an asleep model holds accelerators)."""
    idle = ctx.ports.routes.idle_seconds()
    now_s = ctx.clock.monotonic()
    return [
        ResidentModel(
            name=name,
            residency=model.requested.residency,
            parked=model.parked,
            park_after_idle_s=model.requested.park_after_idle_s,
            min_resident_s=model.requested.min_resident_s,
            idle_s=idle.get(name, 0.0),
            resident_s=ctx.resident.seconds(name, now_s),
            asleep=model.asleep_level is not None,
        )
        for name, model in ctx.desired.state.models.items()
    ]


def complete_wake(
    ctx: FleetContext,
    name: str,
    app: AppName,
    seconds: float | None,
    record: WakeRecord | None = None,
) -> None:
    model = ctx.desired.model(name)
    assert model is not None
    ctx.publish_ready(app, model.config)
    ctx.point_aliases(ctx.desired.state.aliases_of(name), name)
    ctx.desired.update(ctx.desired.state.with_woken(name, app.generation, seconds, record))


def finish_park(
    ctx: FleetContext, details: OperationDetails, phase: str | None
) -> tuple[Outcome, str]:
    """A park interrupted by a restart: undone while draining, else completed."""
    name = details.name or ""
    model = ctx.desired.model(name)
    if model is None:
        return Outcome.FAILED, f"park of {name} was interrupted and {name} no longer exists"
    if model.parked:
        return Outcome.DONE, f"park of {name} had been recorded before the restart"
    if phase in (None, SwapPhase.DRAINING) and (
        ctx.ports.serve.statuses().get(model.app.app) is AppStatus.RUNNING
    ):
        ctx.ports.routes.set_route_state(name, ModelState.READY)
        return Outcome.ROLLED_BACK, (
            f"park of {name} was interrupted while draining; {name} serves on, run park again"
        )
    level = sleep_level_of(model)
    if phase == SwapPhase.SLEEPING and level is not None:
        try:
            ctx.ports.serve.sleep(model.app, level)  # again: a replica asleep stays so
            complete_sleep(ctx, name, level)
            return Outcome.DONE, f"park of {name} was interrupted while it fell asleep; it sleeps"
        except DeployFailed:
            pass  # unloaded below: a half-asleep engine serves nobody
    complete_park(ctx, name)
    return Outcome.DONE, f"park of {name} was interrupted in {phase}; it was completed"


def finish_wake(
    ctx: FleetContext, details: OperationDetails, phase: str | None
) -> tuple[Outcome, str]:
    """A wake interrupted by a restart: completed if its app runs, else undone. A model it
    was parking to make room (its route already parked) is parked."""
    for other, resident in ctx.desired.state.models.items():
        published = ctx.ports.routes.routing_table().models.get(other)
        if not resident.parked and published is not None and (published.state is ModelState.PARKED):
            complete_park(ctx, other)
    name = details.name or ""
    model = ctx.desired.model(name)
    if model is None or details.generation is None:
        return Outcome.FAILED, f"wake of {name} was interrupted and {name} no longer exists"
    if not model.parked:
        return Outcome.DONE, f"wake of {name} had been recorded before the restart"
    if model.asleep_level is not None:
        try:
            ctx.ports.serve.wake(model.app, model.asleep_level)
        except DeployFailed as exc:
            complete_park(ctx, name)
            publish_parked(ctx, model, error=f"its engine failed to wake: {exc}", wake_ended=True)
            return Outcome.FAILED, f"wake of {name} was interrupted; its engine would not wake"
        complete_wake(ctx, name, model.app, None)
        return Outcome.DONE, f"wake of {name} was interrupted in {phase}; it was completed"
    app = AppName(name, details.generation)
    status = ctx.ports.serve.statuses().get(app.app)
    if status is AppStatus.RUNNING:
        # Its start time is unknown here (the restart cut it): the last wake is left as it was.
        complete_wake(ctx, name, app, None)
        return Outcome.DONE, f"wake of {name} was interrupted in {phase}; {name} was running"
    if status is not None:
        ctx.ports.serve.delete(app.app)
    publish_parked(
        ctx, model, error="its wake was interrupted by a manager restart", wake_ended=True
    )
    return Outcome.FAILED, (
        f"wake of {name} was interrupted in {phase}; {name} stays parked, run wake again"
    )
