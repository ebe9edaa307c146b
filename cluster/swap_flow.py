"""A hot swap, break-before-make: drain OLD, free its accelerators, bring NEW up, switch.

Each phase is journaled before it acts (domain/operation.py's SwapPhase says what each one
does). Requests for OLD's aliases wait in the gateways from the drain to the switch, so
none fails; if NEW fails to start, OLD comes back on its own layout and generation.
"""

from __future__ import annotations

from collections.abc import Callable

from cluster.bring_up import bring_up
from cluster.cluster_port import DeployFailed
from cluster.fleet_context import FleetContext
from cluster.operation_recorder import OperationRecorder
from cluster.preflight import preflight
from cluster.waiting import wait_for
from domain.deployment_config import ModelDeploymentConfig
from domain.fleet_state import FleetModel
from domain.model_state import ModelState
from domain.operation import OperationDetails, OperationKind, OperationResult, Outcome, SwapPhase

Begin = Callable[[OperationKind, OperationDetails], OperationRecorder]

DRAIN_POLL_S = 0.2


def swap(
    ctx: FleetContext, begin: Begin, old: str, new: ModelDeploymentConfig, dry_run: bool
) -> OperationResult:
    app = ctx.desired.state.next_app(new.name)
    op = begin(
        OperationKind.SWAP,
        OperationDetails(
            old=old,
            new=new.name,
            source=new.source,
            layout=str(new.layout),
            dry_run=dry_run,
            generation=app.generation,
            new_config=new,
        ),
    )
    op.phase(SwapPhase.PREFLIGHT, f"admission for {new.name}, counting what {old} frees")
    old_model = ctx.desired.model(old)
    if old_model is None:
        return op.end(Outcome.REJECTED, f"no model named '{old}' to replace")
    moving = ctx.desired.state.aliases_of(old)
    new = new.model_copy(update={"aliases": tuple(dict.fromkeys((*new.aliases, *moving)))})
    resource = ctx.settings.accelerator_resource
    freed = ctx.ports.serve.claimed_by(old_model.app.app, resource)
    checked = preflight(ctx, op, new, freed=freed, dry_run=dry_run)
    if not checked.admitted:
        return op.end(
            Outcome.REJECTED, "not admitted, nothing changed: " + "; ".join(checked.reasons)
        )
    if dry_run:
        return op.end(
            Outcome.DONE,
            f"dry run: {old} -> {new.name} as {new.layout} would be admitted; nothing changed",
        )
    assert checked.model_dir is not None

    op.phase(SwapPhase.DRAINING, f"holding {list(moving)} and draining {old}")
    ctx.ports.routes.set_held(frozenset(moving))
    ctx.ports.routes.set_route_state(old, ModelState.DRAINING)
    left = drain(ctx, old)
    op.note(f"{old} drained ({left} requests still in flight at the deadline)")

    op.phase(SwapPhase.REMOVING_OLD, f"removing {old} and waiting for its accelerators")
    ctx.ports.serve.delete(old_model.app.app)
    if not ctx.ports.serve.wait_freed(freed, resource, ctx.settings.free_timeout_s):
        op.note("the accelerators were not all seen free in time; deploying anyway")

    op.phase(SwapPhase.DEPLOYING_NEW, f"deploying {new.name} ({new.layout}) as {app}")
    try:
        bring_up(ctx, app, new, checked.model_dir)
    except DeployFailed as exc:
        op.phase(SwapPhase.ROLLING_BACK, f"{new.name} failed: {exc}")
        return roll_back(ctx, op, old_model, new, str(exc))

    op.phase(SwapPhase.SWITCHING, f"moving {list(moving)} to {new.name}")
    ctx.publish_ready(app, new)
    ctx.ports.routes.remove_route(old, new.name)
    ctx.release_holds()
    ctx.desired.update(ctx.desired.state.without_model(old).with_model(new, app.generation))
    return op.end(Outcome.DONE, f"{old} replaced by {new.name}")


def drain(ctx: FleetContext, name: str) -> int:
    """Wait until no gateway replica has a request in flight for `name` (every replica
    having seen it leave the routing table); the count left at the drain deadline."""
    routes = ctx.ports.routes
    version = routes.routing_table().version
    last = 0

    def drained() -> bool | None:
        nonlocal last
        count = routes.in_flight(name, version)
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
) -> OperationResult:
    """NEW failed after OLD was drained: NEW gone, OLD back as it was, holds released."""
    routes = ctx.ports.routes
    if new.name in routes.routing_table().models:
        routes.remove_route(new.name)
    try:
        model_dir = ctx.ports.nodes.stage(old.config.source)
        bring_up(ctx, old.app, old.config, model_dir)
    except Exception as exc:
        ctx.release_holds()
        return op.end(
            Outcome.FAILED,
            f"{new.name} failed ({error}) and {old.config.name} could not be brought back: {exc}",
        )
    ctx.publish_ready(old.app, old.config)
    ctx.point_aliases(ctx.desired.state.aliases_of(old.config.name), old.config.name)
    ctx.release_holds()
    return op.end(
        Outcome.ROLLED_BACK,
        f"rolled back to {old.config.name}: {new.name} failed to start: {error}",
    )
