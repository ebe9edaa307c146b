"""Bringing one deployment up: placement check, LOADING, deploy, warm-up, and where its
start-up time went.

In two halves, so a break-before-make swap can create NEW's app while OLD still holds the
accelerators (`start_bring_up`: its replica waits for them) and wait for it after OLD is
deleted (`finish_bring_up`).
"""

from __future__ import annotations

from pathlib import Path

from cluster.fleet.fleet_context import FleetContext, model_route
from cluster.fleet.operation_recorder import OperationRecorder
from cluster.fleet.ports import DeployFailed, PlacementRefused
from domain.app_name import AppName
from domain.deployment_config import ModelDeploymentConfig
from domain.engine_capacity import CapacityFigures, ModelCapacity
from domain.model_state import ModelState


def bring_up(
    ctx: FleetContext,
    app: AppName,
    config: ModelDeploymentConfig,
    model_dir: Path,
    op: OperationRecorder | None = None,
    *,
    routed: bool = True,
) -> None:
    """Deploy `config` as `app` and warm it with one real request, LOADING meanwhile.

    Clients see nothing of it until the caller publishes it READY. Raises DeployFailed with
    the app deleted and the route FAILED (a refused placement leaves no route at all).
    `routed=False` leaves the routing table alone: the model's name is served by another app
    of it meanwhile (a same-name swap)."""
    started_at = start_bring_up(ctx, app, config, model_dir, routed=routed)
    finish_bring_up(ctx, app, config, started_at, op, routed=routed)


def start_bring_up(
    ctx: FleetContext,
    app: AppName,
    config: ModelDeploymentConfig,
    model_dir: Path,
    *,
    check_placement: bool = True,
    routed: bool = True,
) -> float:
    """Create `app` (LOADING) without waiting for it; the Unix time it started.

    The app's generation is saved first, so no later deployment reuses its name.
    `check_placement=False` where the accelerators are about to be freed (admission
    counted them): the replica then waits for them."""
    ctx.desired.update(ctx.desired.state.with_generation(app))
    if check_placement:
        problem = ctx.ports.serve.placement_problem(config)
        if problem is not None:
            raise PlacementRefused(f"{config.name} ({config.layout}) cannot be placed: {problem}")
    if routed:
        ctx.ports.routes.put_route(model_route(app, config, ModelState.LOADING))
    try:
        weights = ctx.ports.nodes.locator(config.source)
        return ctx.ports.serve.start_deploy(app, config, model_dir, weights)
    except DeployFailed as exc:
        if routed:
            ctx.ports.routes.set_route_state(config.name, ModelState.FAILED, str(exc))
        raise


def finish_bring_up(
    ctx: FleetContext,
    app: AppName,
    config: ModelDeploymentConfig,
    started_at: float,
    op: OperationRecorder | None,
    *,
    routed: bool = True,
) -> None:
    """Wait for `app` to run, warm it, and record where its start went (`op`'s progress
    and details, the metrics, the fleet's start-up times)."""
    try:
        deployed = ctx.ports.serve.wait_deployed(app, started_at, ctx.settings.deploy_timeout_s)
        warm_started = ctx.clock.monotonic()
        ctx.ports.serve.warm_up(app, ctx.settings.warmup_timeout_s)
        warm_up_s = ctx.clock.monotonic() - warm_started
    except DeployFailed as exc:
        ctx.ports.serve.delete(app.app)
        if routed:
            ctx.ports.routes.set_route_state(config.name, ModelState.FAILED, str(exc))
        raise
    seconds = deployed.running_at - deployed.started_at + warm_up_s
    ctx.desired.update(ctx.desired.state.with_startup(config, seconds))
    ctx.resident.mark(config.name, ctx.clock.monotonic())
    report = ctx.ports.serve.start_report(app, deployed, warm_up_s)
    steps = report.steps
    ctx.metrics.startup_steps(steps.seconds)
    _record_capacity(ctx, report.capacity, config, op)
    if op is not None:
        op.details.startup_steps = steps.seconds
        op.note(f"{config.name} started in {seconds:.1f} s: {steps.describe()}")


def _record_capacity(
    ctx: FleetContext,
    logged: CapacityFigures,
    config: ModelDeploymentConfig,
    op: OperationRecorder | None,
) -> None:
    """What the engine logged of its capacity, next to what admission predicted for it (the
    operation's record; a start without one, as reconcile's redeploy, keeps only the log)."""
    predicted = op.details.predicted_capacity if op is not None else None
    capacity = (predicted or ModelCapacity()).model_copy(update={"observed": logged})
    ctx.desired.update(ctx.desired.state.with_capacity(config.name, capacity))
    ratio = capacity.kv_prediction_ratio
    if op is not None and ratio is not None:
        op.note(
            f"{config.name}'s engine logged {capacity.observed.kv_cache_tokens:,} KV tokens, "
            f"{ratio:.3f} x the prediction"
        )
