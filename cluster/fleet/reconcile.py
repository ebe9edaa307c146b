"""After a (re)start: finish or undo the interrupted operation, then make Serve and the
routing table agree with the desired state.

What is decided, by the journal's last phase and strategy of the interrupted operation:

- a break-before-make swap whose NEW runs (it reached `switching`, or `deploying_new` with
  NEW running) is completed: NEW recorded with OLD's aliases, OLD removed; any other is
  rolled back: NEW removed whatever its status, OLD redeployed if its app is gone, else
  marked READY again;
- a make-before-break swap that had switched (`switching` with NEW running or recorded,
  `draining`, `removing_old`) is completed: OLD removed; one that had not is undone: NEW
  removed, OLD serving as it was, untouched;
- a same-name swap (a fleet file's new engine settings: OLD and NEW share the name under
  two generations) follows the same rules; a route is removed only when it is the app's
  own, since the name's route may still be OLD's;
- an interrupted add is undone (its app and route removed): it was never recorded, and a
  model nobody warmed up must not take traffic;
- an interrupted remove or alias change is completed: both are idempotent;
- an interrupted park or wake is finished as cluster/fleet/residency.py says.

Then every desired model whose app runs is published READY, aliases are republished (the
registry may have restarted too), holds are released, and Serve apps of models' generations
the fleet no longer has are deleted.
"""

from __future__ import annotations

from cluster.fleet.bring_up import bring_up
from cluster.fleet.fleet_context import FleetContext, model_route
from cluster.fleet.ports import AppStatus
from cluster.fleet.residency import finish_park, finish_wake, publish_parked
from domain.app_name import AppName
from domain.model_state import ModelState
from domain.operation import (
    OperationDetails,
    OperationKind,
    Outcome,
    SwapPhase,
    SwapStrategy,
    now,
)


def reconcile(ctx: FleetContext) -> str:
    unfinished = ctx.journal.unfinished()
    message = "nothing to reconcile"
    if unfinished is not None:
        kind = OperationKind(unfinished["kind"])
        details = OperationDetails.model_validate(unfinished.get("details", {}))
        phase = unfinished.get("phase")
        if kind is OperationKind.SWAP:
            outcome, message = finish_swap(ctx, details, phase)
        elif kind is OperationKind.ADD:
            outcome, message = undo_add(ctx, details, phase)
        elif kind is OperationKind.REMOVE:
            outcome, message = finish_remove(ctx, details)
        elif kind is OperationKind.PARK:
            outcome, message = finish_park(ctx, details, phase)
        elif kind is OperationKind.WAKE:
            outcome, message = finish_wake(ctx, details, phase)
        elif kind is OperationKind.RESIDENCY:
            outcome, message = finish_residency(ctx, details)
        else:
            outcome, message = finish_alias(ctx, details)
        ctx.journal.append(
            {
                "op_id": unfinished["op_id"],
                "event": "end",
                "outcome": outcome.value,
                "message": message,
                "after_restart": True,
                "at": now(),
            }
        )
    republish(ctx)
    return message


def finish_swap(
    ctx: FleetContext, details: OperationDetails, phase: str | None
) -> tuple[Outcome, str]:
    if details.strategy is SwapStrategy.MAKE_BEFORE_BREAK:
        return _finish_make_before_break(ctx, details, phase)
    return _finish_break_before_make(ctx, details, phase)


def _finish_make_before_break(
    ctx: FleetContext, details: OperationDetails, phase: str | None
) -> tuple[Outcome, str]:
    old, new_name = details.old or "", details.new
    assert new_name is not None and details.generation is not None
    new_app = AppName(new_name, details.generation)
    statuses = ctx.ports.serve.statuses()
    desired = ctx.desired.state
    switched = phase in (SwapPhase.DRAINING, SwapPhase.REMOVING_OLD) or (
        phase == SwapPhase.SWITCHING
        and (new_name in desired.models or statuses.get(new_app.app) is AppStatus.RUNNING)
    )
    if switched:
        return _complete_forward(ctx, details, phase, new_app)
    # Not switched: OLD never stopped serving; NEW goes, whatever its status.
    if new_app.app in statuses:
        ctx.ports.serve.delete(new_app.app)
    _remove_route_of(ctx, new_app)
    return Outcome.ROLLED_BACK, (
        f"make-before-break swap {old} -> {new_name} interrupted in {phase}, before the "
        f"switch; {new_name} was removed and {old} kept serving, untouched"
    )


def _complete_forward(
    ctx: FleetContext, details: OperationDetails, phase: str | None, new_app: AppName
) -> tuple[Outcome, str]:
    """NEW serves OLD's aliases and is recorded with its own config; OLD is gone."""
    old, new_name = details.old, new_app.model
    desired = ctx.desired.state
    old_model = desired.models.get(old) if old else None
    moving = desired.aliases_of(old) if old else ()
    recorded = desired.models.get(new_name)
    if recorded is not None and recorded.generation != new_app.generation:
        recorded = None  # a same-name swap: what is recorded is OLD
    if recorded is not None:  # killed after the switch recorded NEW
        base = recorded.config
    else:
        assert details.new_config is not None, "a swap journals NEW's config"
        base = details.new_config
    new_config = base.model_copy(update={"aliases": tuple(dict.fromkeys((*base.aliases, *moving)))})
    replaced = old if old and old in ctx.ports.routes.routing_table().models else None
    ctx.ports.routes.switch(
        model_route(new_app, new_config, ModelState.READY),
        frozenset(new_config.aliases),
        replaced,
    )
    state = desired
    if old_model is not None:
        state = state.without_model(old_model.config.name)
    entry = recorded.entry if recorded is not None else details.new_entry
    ctx.desired.update(state.with_model(new_config, new_app.generation, entry))
    if old_model is not None and old_model.app != new_app:
        ctx.ports.serve.delete(old_model.app.app)
    return Outcome.DONE, (
        f"swap {old} -> {new_name} interrupted in {phase}; {new_name} was running, "
        "so the swap was completed"
    )


def _finish_break_before_make(
    ctx: FleetContext, details: OperationDetails, phase: str | None
) -> tuple[Outcome, str]:
    """Complete the swap if NEW runs, else roll back to OLD."""
    old, new_name = details.old, details.new
    assert new_name is not None and details.generation is not None
    new_app = AppName(new_name, details.generation)
    statuses = ctx.ports.serve.statuses()
    new_running = statuses.get(new_app.app) is AppStatus.RUNNING
    desired = ctx.desired.state
    old_model = desired.models.get(old) if old else None
    if phase == SwapPhase.SWITCHING or (phase == SwapPhase.DEPLOYING_NEW and new_running):
        return _complete_forward(ctx, details, phase, new_app)
    # NEW may still be deploying (not RUNNING): remove it whatever its status, so it
    # neither holds accelerators nor shows up as a second model.
    if new_app.app in statuses:
        ctx.ports.serve.delete(new_app.app)
    _remove_route_of(ctx, new_app)
    if old_model is not None and statuses.get(old_model.app.app) is not AppStatus.RUNNING:
        try:
            model_dir = ctx.ports.nodes.stage(old_model.config.source).model_dir
            bring_up(ctx, old_model.app, old_model.config, model_dir)
        except Exception as exc:  # staging or the deploy: OLD stays down, said so
            return Outcome.FAILED, (
                f"swap {old} -> {new_name} interrupted in {phase}; {new_name} was removed "
                f"and {old} could not be brought back: {exc}"
            )
    return Outcome.ROLLED_BACK, (
        f"swap {old} -> {new_name} interrupted in {phase}; {new_name} was not running, "
        f"so {old} was kept"
    )


def undo_add(
    ctx: FleetContext, details: OperationDetails, phase: str | None
) -> tuple[Outcome, str]:
    name = details.name
    if name is None or details.generation is None or name in ctx.desired.state.models:
        return Outcome.DONE, f"add of {name} had been recorded before the restart"
    app = AppName(name, details.generation)
    if app.app in ctx.ports.serve.statuses():
        ctx.ports.serve.delete(app.app)
    if name in ctx.ports.routes.routing_table().models:
        ctx.ports.routes.remove_route(name)
    return Outcome.FAILED, (
        f"add of {name} was interrupted in {phase}; its deployment was removed, run the add again"
    )


def finish_remove(ctx: FleetContext, details: OperationDetails) -> tuple[Outcome, str]:
    name = details.name or ""
    model = ctx.desired.model(name)
    if model is None:
        return Outcome.DONE, f"remove of {name} had been recorded before the restart"
    if name in ctx.ports.routes.routing_table().models:
        ctx.ports.routes.remove_route(name)
    ctx.ports.serve.delete(model.app.app)
    ctx.desired.update(ctx.desired.state.without_model(name))
    return Outcome.DONE, f"remove of {name} was interrupted; it was completed"


def finish_alias(ctx: FleetContext, details: OperationDetails) -> tuple[Outcome, str]:
    alias, name = details.alias or "", details.name or ""
    if name not in ctx.desired.state.models or alias in ctx.desired.state.models:
        return Outcome.FAILED, f"alias {alias} -> {name} was interrupted and no longer applies"
    ctx.point_aliases((alias,), name)
    ctx.desired.update(ctx.desired.state.with_alias(alias, name))
    return Outcome.DONE, f"alias {alias} -> {name} was interrupted; it was completed"


def finish_residency(ctx: FleetContext, details: OperationDetails) -> tuple[Outcome, str]:
    """Recording the keys is one snapshot write: done again, it is done."""
    name, entry = details.name or "", details.new_entry
    if entry is None or name not in ctx.desired.state.models:
        return Outcome.FAILED, f"residency change of {name} was interrupted and no longer applies"
    ctx.desired.update(ctx.desired.state.with_entry(name, entry))
    return Outcome.DONE, f"residency change of {name} was interrupted; it was completed"


def _remove_route_of(ctx: FleetContext, app: AppName) -> None:
    """Drop `app`'s route, unless the model's route is another app's: in a same-name swap
    it is OLD's, still serving."""
    route = ctx.ports.routes.routing_table().models.get(app.model)
    if route is not None and route.app_name == app.app:
        ctx.ports.routes.remove_route(app.model)


def republish(ctx: FleetContext) -> None:
    """Routes, aliases and holds as the desired state says; orphaned model apps deleted."""
    routes, serve = ctx.ports.routes, ctx.ports.serve
    desired = ctx.desired.state
    table = routes.routing_table()
    statuses = serve.statuses()
    rebuilding = not routes.is_open()
    for name, model in desired.models.items():
        published = table.models.get(name)
        if model.parked:
            if published is None or published.state is not ModelState.PARKED:
                publish_parked(ctx, model)
            continue
        running = statuses.get(model.app.app) is AppStatus.RUNNING
        ready = (
            published is not None
            and published.app_name == model.app.app
            and published.state is ModelState.READY
        )
        if running and not ready:
            routes.put_route(model_route(model.app, model.config, ModelState.READY))
        elif rebuilding and not running and published is None:
            # A registry rebuilt while this model has no replica: listed, and 503 (not 404)
            # until the health watch sees it running again.
            routes.put_route(model_route(model.app, model.config, ModelState.DEGRADED))
    moved = {a: n for a, n in desired.aliases.items() if table.aliases.get(a) != n}
    if moved:
        routes.set_aliases(moved)
    if table.held_aliases:
        ctx.release_holds()
    # An asleep model's app runs: it is parked, not gone.
    wanted = {
        m.app.app for m in desired.models.values() if not m.parked or m.asleep_level is not None
    }
    for app_name in statuses:
        if AppName.parse(app_name) is not None and app_name not in wanted:
            serve.delete(app_name)
    # Last: a registry that lost its state publishes the table only once it is whole.
    if rebuilding:
        routes.open_table()
