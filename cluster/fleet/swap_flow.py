"""A hot swap of OLD for NEW, by the strategy the hardware allows.

- make-before-break, when admission places NEW on accelerators free while OLD still runs:
  NEW is deployed and warmed beside OLD, the aliases move to it in one registry update
  (in-flight requests finish on OLD, new ones go to NEW), then OLD is drained and removed.
  Nothing is held; a NEW that fails leaves OLD serving, untouched.
- break-before-make otherwise: OLD's aliases are held while OLD is drained and removed and
  NEW starts on what OLD freed; if NEW fails, OLD comes back on its own layout and
  generation.

`auto` picks the first that admission allows. Each phase is journaled before it acts
(domain/operation.py's SwapPhase says what each one does), and so is the resolved strategy,
so a restarted manager finishes the swap by the path it was on (cluster/fleet/reconcile.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cluster.fleet.bring_up import bring_up, finish_bring_up, start_bring_up
from cluster.fleet.fleet_context import FleetContext, model_route
from cluster.fleet.operation_recorder import OperationRecorder
from cluster.fleet.ports import DeployFailed, wait_for
from cluster.fleet.preflight import (
    PreflightResult,
    Staged,
    Verdict,
    level_one_host_refusals,
    record_admission,
    refusals,
    resolve,
    stage_and_probe,
    verdict,
    with_placement,
)
from domain.app_name import AppName
from domain.deployment_config import ModelDeploymentConfig
from domain.fleet_state import FleetModel
from domain.model_state import ModelState
from domain.operation import (
    OperationDetails,
    OperationKind,
    OperationResult,
    Outcome,
    SwapPhase,
    SwapStrategy,
    now,
)
from domain.operation_request import SwapRequest
from domain.residency import ParkMode

Begin = Callable[[OperationKind, OperationDetails], OperationRecorder]

DRAIN_POLL_S = 0.2


@dataclass(frozen=True)
class StrategyChoice:
    strategy: SwapStrategy
    reason: str
    refused: tuple[str, ...] = ()
    """Admission's reasons when the strategy asked for (or every one) is refused."""
    judged: Verdict | None = None
    """The verdict recorded for the strategy (where NEW's GPUs go)."""


def choose_strategy(
    ctx: FleetContext,
    op: OperationRecorder,
    new: ModelDeploymentConfig,
    staged: Staged,
    claimed: Mapping[str, int],
    asked: SwapStrategy,
) -> StrategyChoice:
    """The strategy to swap by, and why; admission's verdict is recorded for that one."""
    mbb, bbm = SwapStrategy.MAKE_BEFORE_BREAK, SwapStrategy.BREAK_BEFORE_MAKE
    observed = ctx.desired.state.observed_capacity

    def judged_with(freed: Mapping[str, int] | None) -> tuple[Verdict, tuple[str, ...]]:
        judged = verdict(new, staged, freed=freed, observed=observed)
        return judged, record_admission(ctx, op, new, staged, judged)

    if asked is mbb:
        judged, refused = judged_with(None)
        return StrategyChoice(mbb, "asked for; NEW fits beside OLD", refused, judged)
    if asked is bbm:
        judged, refused = judged_with(claimed)
        return StrategyChoice(bbm, "asked for", refused, judged)
    # Asked first whether NEW fits beside OLD; only the strategy's own verdict is recorded.
    beside = verdict(new, staged, freed=None)
    not_beside = refusals(beside)
    if not not_beside:
        record_admission(ctx, op, new, staged, beside)
        return StrategyChoice(mbb, "NEW fits on accelerators free while OLD runs", (), beside)
    judged, refused = judged_with(claimed)
    why = f"NEW does not fit beside OLD ({not_beside[0]}), so it takes the accelerators OLD frees"
    return StrategyChoice(bbm, why, refused, judged)


def swap(ctx: FleetContext, begin: Begin, request: SwapRequest) -> OperationResult:
    old, new = request.old, request.config
    app = ctx.desired.state.next_app(new.name)
    op = begin(
        OperationKind.SWAP,
        OperationDetails(
            old=old,
            new=new.name,
            source=new.source,
            layout=str(new.layout),
            dry_run=request.dry_run,
            generation=app.generation,
            new_config=new,
            new_entry=request.entry,
        ),
    )
    op.phase(SwapPhase.PREFLIGHT, f"admission for {new.name}, next to or in place of {old}")
    old_model = ctx.desired.model(old)
    if old_model is None:
        return op.end(Outcome.REJECTED, f"no model named '{old}' to replace")
    moving = ctx.desired.state.aliases_of(old)
    new = new.model_copy(update={"aliases": tuple(dict.fromkeys((*new.aliases, *moving)))})
    claimed = ctx.ports.serve.claimed_by(old_model.app.app, ctx.settings.accelerator_resource)
    park_mode = request.entry.park_mode if request.entry is not None else ParkMode.UNLOAD
    staged = stage_and_probe(
        ctx, op, new, dry_run=request.dry_run, replacing=old, park_mode=park_mode
    )
    if isinstance(staged, PreflightResult):
        return op.end(
            Outcome.REJECTED, "not admitted, nothing changed: " + "; ".join(staged.reasons)
        )
    auto = request.entry is not None and request.entry.auto_layout
    # `layout: auto` counts OLD's accelerators as free: they are the model's own.
    objective = request.entry.objective if request.entry is not None else "throughput"
    resolved = resolve(ctx, op, new, staged, freed=claimed, auto_layout=auto, objective=objective)
    if isinstance(resolved, tuple):
        return op.end(Outcome.REJECTED, "not admitted, nothing changed: " + "; ".join(resolved))
    new = resolved
    entry = request.entry
    if entry is not None and entry.park_mode is ParkMode.SLEEP and entry.sleep_level == 1:
        pinned = level_one_host_refusals(ctx, new, staged)
        if pinned:
            return op.end(Outcome.REJECTED, "not admitted, nothing changed: " + "; ".join(pinned))
    # Journaled as asked (its own aliases): a restart adds OLD's, as the swap does.
    op.details.new_config = new.model_copy(update={"aliases": request.config.aliases})
    choice = choose_strategy(ctx, op, new, staged, claimed, request.strategy)
    op.decide(strategy=choice.strategy, strategy_reason=choice.reason)
    if choice.refused:
        return op.end(
            Outcome.REJECTED,
            f"not admitted ({choice.strategy}), nothing changed: " + "; ".join(choice.refused),
        )
    if choice.judged is not None:
        placed = with_placement(ctx, op, new, choice.judged, staged)
        if isinstance(placed, tuple):
            return op.end(Outcome.REJECTED, "not admitted, nothing changed: " + "; ".join(placed))
        new = placed
        op.details.new_config = new.model_copy(update={"aliases": request.config.aliases})
    op.note(f"strategy {choice.strategy}: {choice.reason}")
    predicted = predicted_hold_s(ctx, new, choice.strategy)
    if predicted is not None and predicted > ctx.settings.hold_timeout_s:
        op.note(
            f"warning: the hold is predicted to last about {predicted:.0f} s (NEW's last "
            f"start), longer than the gateways hold requests ({ctx.settings.hold_timeout_s:g} "
            f"s): requests for {sorted(new.aliases)} will get 503 + Retry-After meanwhile"
        )
    if request.dry_run:
        return op.end(
            Outcome.DONE,
            f"dry run: {old} -> {new.name} as {new.layout} would be admitted "
            f"({choice.strategy}); nothing changed",
        )
    if choice.strategy is SwapStrategy.MAKE_BEFORE_BREAK:
        return _make_before_break(ctx, op, old_model, new, app, staged.model_dir, request)
    return _break_before_make(
        ctx, op, old_model, new, app, staged.model_dir, claimed, predicted, request
    )


def _make_before_break(
    ctx: FleetContext,
    op: OperationRecorder,
    old: FleetModel,
    new: ModelDeploymentConfig,
    app: AppName,
    model_dir: Path,
    request: SwapRequest,
) -> OperationResult:
    moving = frozenset(new.aliases)
    name = old.config.name
    same_name = new.name == name
    op.phase(SwapPhase.DEPLOYING_NEW, f"deploying {new.name} as {app} beside {old.app}")
    try:
        # A same-name NEW stays off the routing table until the switch: OLD serves the name.
        bring_up(ctx, app, new, model_dir, op, routed=not same_name)
    except DeployFailed as exc:
        if not same_name and new.name in ctx.ports.routes.routing_table().models:
            ctx.ports.routes.remove_route(new.name)
        return op.end(
            Outcome.ROLLED_BACK,
            f"rolled back: {new.name} failed to start: {exc}; {name} kept serving, untouched",
        )
    op.phase(SwapPhase.SWITCHING, f"moving {sorted(moving)} to {new.name} in one update")
    ctx.ports.routes.switch(model_route(app, new, ModelState.READY), moving, name)
    op.alias_unavailability(dict.fromkeys(moving, 0.0))
    state = ctx.desired.state.without_model(name)
    ctx.desired.update(state.with_model(new, app.generation, request.entry))
    op.phase(SwapPhase.DRAINING, f"draining {old.app}: its requests in flight finish on it")
    left = drain(ctx, old.app.app)
    op.note(f"{name} drained ({left} requests still in flight at the deadline)")
    op.phase(SwapPhase.REMOVING_OLD, f"removing {name}")
    ctx.ports.serve.delete(old.app.app)
    return op.end(Outcome.DONE, f"{name} replaced by {new.name} (nothing held)")


def _break_before_make(
    ctx: FleetContext,
    op: OperationRecorder,
    old: FleetModel,
    new: ModelDeploymentConfig,
    app: AppName,
    model_dir: Path,
    freed: Mapping[str, int],
    predicted_hold: float | None,
    request: SwapRequest,
) -> OperationResult:
    moving = frozenset(new.aliases)
    name = old.config.name
    same_name = new.name == name
    # A same-name swap holds the model's own name too: it will be served again.
    held = moving | {name} if same_name else moving
    if request.prefetch_weights:
        # Before the hold: a load from memory makes the part inside it shorter.
        op.note(ctx.ports.nodes.prefetch(model_dir).describe())
    op.phase(SwapPhase.DRAINING, f"holding {sorted(held)} and draining {name}")
    held_at = ctx.clock.monotonic()
    ends_at = None if predicted_hold is None else now() + predicted_hold
    ctx.ports.routes.hold(dict.fromkeys(sorted(held), ends_at))
    ctx.ports.routes.set_route_state(name, ModelState.DRAINING)
    left = drain(ctx, old.app.app)
    op.note(f"{name} drained ({left} requests still in flight at the deadline)")

    started_at: float | None = None
    if request.deploy_early:
        op.phase(SwapPhase.REMOVING_OLD, f"deploying {app} to wait for {name}'s accelerators")
        try:
            started_at = start_bring_up(
                ctx, app, new, model_dir, check_placement=False, routed=not same_name
            )
        except DeployFailed as exc:
            # OLD was never touched: it serves again at once.
            ctx.ports.routes.set_route_state(name, ModelState.READY)
            why = f"{new.name} could not be deployed: {exc}"
            return _released(ctx, op, frozenset(held), held_at, why)
        op.note(f"removing {name}: {app}'s replica starts as soon as its accelerators free")
        ctx.ports.serve.delete(old.app.app)
    else:
        op.phase(SwapPhase.REMOVING_OLD, f"removing {name} and waiting for its accelerators")
        ctx.ports.serve.delete(old.app.app)
        resource = ctx.settings.accelerator_resource
        if not ctx.ports.serve.wait_freed(freed, resource, ctx.settings.free_timeout_s):
            op.note("the accelerators were not all seen free in time; deploying anyway")

    op.phase(SwapPhase.DEPLOYING_NEW, f"deploying {new.name} ({new.layout}) as {app}")
    try:
        if started_at is None:
            started_at = start_bring_up(ctx, app, new, model_dir, routed=not same_name)
        finish_bring_up(ctx, app, new, started_at, op, routed=not same_name)
    except DeployFailed as exc:
        op.phase(SwapPhase.ROLLING_BACK, f"{new.name} failed: {exc}")
        return roll_back(ctx, op, old, new, str(exc), held=moving, held_at=held_at)

    op.phase(SwapPhase.SWITCHING, f"moving {sorted(moving)} to {new.name}")
    ctx.ports.routes.switch(model_route(app, new, ModelState.READY), moving, name)
    op.alias_unavailability(dict.fromkeys(moving, ctx.clock.monotonic() - held_at))
    state = ctx.desired.state.without_model(name)
    ctx.desired.update(state.with_model(new, app.generation, request.entry))
    return op.end(Outcome.DONE, f"{name} replaced by {new.name}")


def _released(
    ctx: FleetContext,
    op: OperationRecorder,
    held: frozenset[str],
    held_at: float,
    why: str,
) -> OperationResult:
    ctx.release_holds(held)
    op.alias_unavailability(dict.fromkeys(held, ctx.clock.monotonic() - held_at))
    return op.end(Outcome.ROLLED_BACK, f"rolled back: {why}; the old model kept its place")


def predicted_hold_s(
    ctx: FleetContext, new: ModelDeploymentConfig, strategy: SwapStrategy
) -> float | None:
    """How long a swap holds its aliases: nothing under make-before-break; NEW's last start
    (deploy to warmed, same source and layout) under break-before-make, when known. A lower
    bound: the drain and OLD's removal come on top."""
    if strategy is SwapStrategy.MAKE_BEFORE_BREAK:
        return 0.0
    return ctx.desired.state.startup_of(new)


def drain(ctx: FleetContext, app: str) -> int:
    """Wait until no gateway replica has a request in flight for the Serve app `app` (every
    replica having seen the routing table that stopped sending it new ones); the count left
    at the drain deadline."""
    routes = ctx.ports.routes
    version = routes.routing_table().version
    last = 0

    def drained() -> bool | None:
        nonlocal last
        count = routes.in_flight(app, version)
        if count == 0:
            return True
        last = count if count is not None else last
        return None

    found = wait_for(
        drained, timeout_s=ctx.settings.drain_timeout_s, poll_s=DRAIN_POLL_S, clock=ctx.clock
    )
    return 0 if found else last


def roll_back(
    ctx: FleetContext,
    op: OperationRecorder,
    old: FleetModel,
    new: ModelDeploymentConfig,
    error: str,
    *,
    held: frozenset[str],
    held_at: float,
) -> OperationResult:
    """NEW failed after OLD was drained: NEW gone, OLD back as it was, holds released."""

    def released() -> None:
        ctx.release_holds(held)
        op.alias_unavailability(dict.fromkeys(held, ctx.clock.monotonic() - held_at))

    routes = ctx.ports.routes
    if new.name != old.config.name and new.name in routes.routing_table().models:
        routes.remove_route(new.name)
    try:
        model_dir = ctx.ports.nodes.stage(old.config.source).model_dir
        bring_up(ctx, old.app, old.config, model_dir, op)
    except Exception as exc:
        released()
        return op.end(
            Outcome.FAILED,
            f"{new.name} failed ({error}) and {old.config.name} could not be brought back: {exc}",
        )
    ctx.publish_ready(old.app, old.config)
    ctx.point_aliases(ctx.desired.state.aliases_of(old.config.name), old.config.name)
    released()
    return op.end(
        Outcome.ROLLED_BACK,
        f"rolled back to {old.config.name}: {new.name} failed to start: {error}",
    )
