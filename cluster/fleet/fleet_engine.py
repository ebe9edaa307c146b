"""The fleet engine: owns the desired state and performs every change, one at a time.

Plain code against the cluster ports (cluster/fleet/ports.py): the same engine runs in
the manager actor on Ray and Serve, and in unit tests on an in-memory cluster. Every
operation is journaled step by step before it acts (cluster/fleet/journal.py), admission runs on
every change, and a swap that fails after OLD was drained puts OLD back by itself
(cluster/fleet/swap_flow.py); a restarted engine finishes or undoes what was interrupted
(cluster/fleet/reconcile.py).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from pydantic import ValidationError

from cluster.fleet.bring_up import bring_up
from cluster.fleet.fleet_context import DesiredFleet, FleetContext, ResidentSince
from cluster.fleet.fleet_metrics import DiscardFleetMetrics, FleetMetrics
from cluster.fleet.fleet_plan import FleetPlan, LiveModel, PlanSources, plan_fleet
from cluster.fleet.journal import Journal
from cluster.fleet.manager_settings import ManagerSettings
from cluster.fleet.model_health import HealthChange, health_changes
from cluster.fleet.operation_recorder import OperationRecorder
from cluster.fleet.ports import Clock, ClusterPorts, DeployFailed, RoutesUnavailable, SystemClock
from cluster.fleet.preflight import preflight
from cluster.fleet.reconcile import reconcile, republish
from cluster.fleet.residency import park, publish_parked, resident_models, wake
from cluster.fleet.swap_flow import swap
from cluster.inventory.policy_inventory import policy_inventory
from domain.accelerator_claims import summed_claims
from domain.deployment_config import ModelDeploymentConfig
from domain.fleet_file import FleetFile, FleetModelEntry, exported_entries
from domain.fleet_file_diff import diff_fleet
from domain.fleet_state import FleetState
from domain.model_state import ModelState
from domain.operation import (
    OperationDetails,
    OperationEvent,
    OperationKind,
    OperationResult,
    Outcome,
    RunningOperation,
    SwapPhase,
    SwapSummary,
    now,
)
from domain.operation_request import (
    AddRequest,
    AliasRequest,
    OperationRequest,
    ParkRequest,
    RemoveRequest,
    ResidencyRequest,
    SwapRequest,
    WakeRequest,
)
from domain.residency import ParkReason, Residency, idle_to_park
from domain.validation_message import dotted, validation_line

log = logging.getLogger(__name__)

READY_WAIT_S = 600.0
"""How long an operation waits for a restarted engine to finish reconciling."""
LOCK_WAIT_S = 2.0
"""The health watch holds the lock for a moment now and then; changes never queue."""
WAKE_LOCK_WAIT_S = 600.0
"""A wake waits this long for the change running before it (a client is waiting for the
model); every other change is refused at once while one runs."""


class FleetEngine:
    def __init__(
        self,
        settings: ManagerSettings,
        ports: ClusterPorts,
        journal: Journal,
        metrics: FleetMetrics | None = None,
        clock: Clock | None = None,
    ) -> None:
        clock = clock or SystemClock()
        self._ctx = FleetContext(
            settings=settings,
            ports=ports,
            journal=journal,
            metrics=metrics or DiscardFleetMetrics(),
            clock=clock,
            desired=DesiredFleet(journal),
            resident=ResidentSince(started_at=clock.monotonic()),
        )
        self._lock = threading.Lock()
        self._current: OperationRecorder | None = None
        self._last_swap: SwapSummary | None = None
        self._ready = threading.Event()

    # ------------------------------------------------------------------ queries
    def current(self) -> RunningOperation | None:
        op = self._current
        return None if op is None else op.running()

    def events(self, since: int = 0) -> list[OperationEvent]:
        op = self._current
        return [] if op is None else op.events[since:]

    def fleet(self) -> FleetState:
        return self._ctx.desired.state

    def last_swap(self) -> SwapSummary | None:
        """The latest swap that changed something (done, rolled back or failed)."""
        return self._last_swap

    def wait_ready(self, timeout_s: float) -> bool:
        return self._ready.wait(timeout_s)

    def inventory(self) -> dict[str, Any]:
        """Every node's probed and overridden hardware, as admission sees it now."""
        return self._ctx.ports.nodes.probe().to_json()

    def plan(self, desired: FleetFile) -> FleetPlan:
        """The steps from the live fleet to `desired`, each judged (cluster/fleet/fleet_plan.py);
        changes nothing."""
        ctx = self._ctx
        state = ctx.desired.state
        live_entries = {name: model.requested for name, model in state.models.items()}
        diff = diff_fleet(live_entries, state.aliases, desired)
        probed = ctx.ports.nodes.probe()
        inventory = policy_inventory(
            probed.facts, probed.available, ctx.settings.accelerator, probed.totals
        )
        resource = ctx.settings.accelerator_resource
        live = {
            name: LiveModel(
                live_entries[name],
                model.config,
                ctx.ports.serve.claimed_by(model.app.app, resource),
            )
            for name, model in state.models.items()
        }
        sources = PlanSources(
            model_dir=ctx.ports.nodes.read_config,
            inventory=inventory,
            accelerator=ctx.settings.accelerator,
            startup_of=state.startup_of,
            observed=state.observed_capacity,
        )
        return plan_fleet(diff, live, state.aliases, sources)

    def export(self) -> list[FleetModelEntry]:
        """Each live model's entry as asked for, with the aliases it has now."""
        state = self._ctx.desired.state
        return exported_entries(
            {name: model.requested for name, model in state.models.items()}, state.aliases
        )

    def record_apply(self, record: dict[str, Any]) -> None:
        """Journal an `apply` (its file's sha256, who ran it, its steps; then its end)."""
        self._ctx.journal.append({"event": "apply", **record, "at": now()})

    # ------------------------------------------------------------------ entry point
    def run(self, request: OperationRequest) -> OperationResult:
        """Perform one operation; its result says done / rejected / rolled back / failed."""
        if not self._ready.wait(READY_WAIT_S):
            return self._refusal(request.kind, "the manager is still reconciling after a restart")
        wait_s = WAKE_LOCK_WAIT_S if isinstance(request, WakeRequest) else LOCK_WAIT_S
        if not self._lock.acquire(timeout=wait_s):
            running = self._current
            what = (
                f"{running.kind.value} {running.details.model_dump(mode='json')}"
                if running
                else "an operation"
            )
            return self._refusal(
                request.kind,
                f"another change is running ({what}); changes never interleave, "
                "retry when it has finished",
            )
        try:
            result = self._run(request)
            if isinstance(request, RemoveRequest | ParkRequest) or (
                isinstance(request, SwapRequest) and not request.dry_run
            ):
                self._release_weights()
            return result
        except ValidationError as exc:
            # Valid on its own but not on this cluster (expert parallel asked of the CPU
            # engine): refused, nothing changed.
            return self._refusal(request.kind, validation_line(exc, dotted("")))
        finally:
            self._current = None
            self._lock.release()

    def _release_weights(self) -> None:
        """Unpin, on every node, the weights no model of the fleet uses any more (a swap's
        OLD, a removed model): eviction may reclaim them again."""
        serving = frozenset(m.config.source for m in self._ctx.desired.state.models.values())
        try:
            self._ctx.ports.nodes.release(serving)
        except Exception as exc:
            # A pin left behind keeps files longer; it never breaks serving.
            log.warning("could not release the weights' pins: %r", exc)

    def _run(self, request: OperationRequest) -> OperationResult:
        match request:
            case AddRequest():
                entry = request.entry or FleetModelEntry.of_config(request.config)
                config = entry.with_park_engine(self._with_cluster_defaults(request.config))
                return self._add(config, request.dry_run, entry)
            case SwapRequest():
                entry = request.entry or FleetModelEntry.of_config(request.config)
                config = entry.with_park_engine(self._with_cluster_defaults(request.config))
                resolved = request.model_copy(update={"config": config, "entry": entry})
                result = swap(self._ctx, self._begin, resolved)
                if not request.dry_run and result.outcome is not Outcome.REJECTED:
                    self._last_swap = SwapSummary.of(result, now())
                return result
            case RemoveRequest():
                return self._remove(request.name)
            case AliasRequest():
                return self._set_alias(request.alias, request.name)
            case ParkRequest():
                return park(self._ctx, self._begin, request.name)
            case WakeRequest():
                return wake(self._ctx, self._begin, request.name, request.trigger)
            case ResidencyRequest():
                return self._set_residency(request.name, request.entry)

    def _with_cluster_defaults(self, config: ModelDeploymentConfig) -> ModelDeploymentConfig:
        """What a request leaves to the cluster: its accelerator kind, and eager mode on
        the CPU (torch.compile costs about a minute per engine start on 2 cores)."""
        data = config.model_dump(mode="json", exclude_unset=True)
        accelerator = self._ctx.settings.accelerator
        data.setdefault("accelerator", accelerator.model_dump(mode="json"))
        if data["accelerator"].get("kind", "gpu") == "cpu":
            data.setdefault("engine", {}).setdefault("enforce_eager", True)
        return ModelDeploymentConfig.model_validate(data)

    def _refusal(self, kind: OperationKind, message: str) -> OperationResult:
        self._ctx.metrics.operation_finished(kind.value, Outcome.REJECTED.value, 0.0, None)
        return OperationResult(op_id="-", kind=kind, outcome=Outcome.REJECTED, message=message)

    def _begin(self, kind: OperationKind, details: OperationDetails) -> OperationRecorder:
        op = OperationRecorder(self._ctx.journal, self._ctx.metrics, kind, details)
        self._current = op
        return op

    # ------------------------------------------------------------------ add / remove / alias
    def _add(
        self, config: ModelDeploymentConfig, dry_run: bool, entry: FleetModelEntry
    ) -> OperationResult:
        ctx = self._ctx
        app = ctx.desired.state.next_app(config.name)
        op = self._begin(
            OperationKind.ADD,
            OperationDetails(
                name=config.name,
                source=config.source,
                layout=str(config.layout),
                dry_run=dry_run,
                generation=app.generation,
                new_config=config,
                new_entry=entry,
            ),
        )
        op.phase(SwapPhase.PREFLIGHT, f"admission for {config.name}")
        # An on-demand model is judged as it will run: beside the `always` models, with
        # every other on-demand model parked.
        on_demand = entry.residency is Residency.ON_DEMAND
        checked = preflight(
            ctx,
            op,
            config,
            freed=None,
            dry_run=dry_run,
            auto_layout=entry.auto_layout,
            objective=entry.objective,
            parkable=self._on_demand_claims() if on_demand else None,
            park_mode=entry.park_mode,
            sleep_level=entry.sleep_level,
            parkable_models=frozenset(self._resident_on_demand()) if on_demand else frozenset(),
        )
        if not checked.admitted:
            return op.end(Outcome.REJECTED, "not admitted: " + "; ".join(checked.reasons))
        assert checked.config is not None
        config = checked.config
        op.details.new_config = config
        parked_because = (
            f"the accelerators it needs are held by on-demand models "
            f"({', '.join(self._resident_on_demand())}); its first request wakes it, "
            "parking them least recently used first"
        )
        if dry_run:
            how = f"parked ({parked_because})" if checked.once_parked else ""
            return op.end(
                Outcome.DONE,
                f"dry run: {config.name} would be admitted as {config.layout}"
                f"{', ' + how if how else ''}; nothing changed",
            )
        assert checked.model_dir is not None
        if checked.once_parked:
            return self._add_parked(op, config, entry, app.generation, parked_because)
        op.phase(SwapPhase.DEPLOYING_NEW, f"deploying {config.name} as {app}")
        started = ctx.clock.monotonic()
        try:
            bring_up(ctx, app, config, checked.model_dir, op)
        except DeployFailed as exc:
            if config.name in ctx.ports.routes.routing_table().models:
                ctx.ports.routes.remove_route(config.name)
            return op.end(Outcome.FAILED, f"{config.name} failed to start: {exc}")
        ctx.publish_ready(app, config)
        ctx.desired.update(ctx.desired.state.with_model(config, app.generation, entry))
        seconds = ctx.clock.monotonic() - started
        return op.end(Outcome.DONE, f"{config.name} is serving ({seconds:.1f} s)")

    def _on_demand_claims(self) -> dict[str, int]:
        """The accelerators per node that on-demand models hold (serving, or asleep): what
        a model added on demand may count free, since a wake parks them to make room."""
        ctx = self._ctx
        resource = ctx.settings.accelerator_resource
        models = ctx.desired.state.models
        return summed_claims(
            ctx.ports.serve.claimed_by(models[name].app.app, resource)
            for name in self._resident_on_demand()
        )

    def _resident_on_demand(self) -> list[str]:
        return sorted(
            name
            for name, m in self._ctx.desired.state.models.items()
            if m.requested.residency is Residency.ON_DEMAND
            and (not m.parked or m.asleep_level is not None)
        )

    def _add_parked(
        self,
        op: OperationRecorder,
        config: ModelDeploymentConfig,
        entry: FleetModelEntry,
        generation: int,
        why: str,
    ) -> OperationResult:
        """An on-demand model that fits only once others park: added parked (its name,
        aliases and route published, its weights staged and pinned), not started. Adding a
        model never evicts a serving one; a request does, by the residency rules."""
        ctx = self._ctx
        ctx.desired.update(
            ctx.desired.state.with_model(config, generation, entry).with_parked(config.name)
        )
        model = ctx.desired.model(config.name)
        assert model is not None
        publish_parked(ctx, model)
        ctx.point_aliases(ctx.desired.state.aliases_of(config.name), config.name)
        return op.end(Outcome.DONE, f"{config.name} is added parked: {why}")

    def _remove(self, name: str) -> OperationResult:
        ctx = self._ctx
        op = self._begin(OperationKind.REMOVE, OperationDetails(name=name))
        model = ctx.desired.model(name)
        if model is None:
            return op.end(Outcome.REJECTED, f"no model named '{name}'")
        op.phase(SwapPhase.REMOVING_OLD, f"removing {name}")
        ctx.ports.routes.remove_route(name)
        ctx.ports.serve.delete(model.app.app)
        ctx.desired.update(ctx.desired.state.without_model(name))
        return op.end(Outcome.DONE, f"{name} removed")

    def _set_alias(self, alias: str, name: str) -> OperationResult:
        ctx = self._ctx
        op = self._begin(OperationKind.ALIAS, OperationDetails(alias=alias, name=name))
        if name not in ctx.desired.state.models:
            return op.end(Outcome.REJECTED, f"no model named '{name}'")
        if alias in ctx.desired.state.models:
            return op.end(Outcome.REJECTED, f"'{alias}' is a model name, not an alias")
        ctx.point_aliases((alias,), name)
        ctx.desired.update(ctx.desired.state.with_alias(alias, name))
        return op.end(Outcome.DONE, f"alias {alias} -> {name}")

    def _set_residency(self, name: str, entry: FleetModelEntry) -> OperationResult:
        ctx = self._ctx
        op = self._begin(OperationKind.RESIDENCY, OperationDetails(name=name, new_entry=entry))
        model = ctx.desired.model(name)
        if model is None:
            return op.end(Outcome.REJECTED, f"no model named '{name}'")
        if model.requested.deployed_form() != entry.deployed_form():
            return op.end(
                Outcome.REJECTED,
                f"{name}'s deployment differs from the entry's: that is a swap, not a "
                "residency change",
            )
        ctx.desired.update(ctx.desired.state.with_entry(name, entry))
        keys = ", ".join(f"{k} {v}" for k, v in entry.residency_form().items())
        return op.end(Outcome.DONE, f"{name}: {keys}")

    # ------------------------------------------------------------------ health
    def check_health(self) -> list[HealthChange]:
        """One pass of the health watch: a served model with no running replica (engine or
        node lost) becomes DEGRADED, and READY again once Serve has re-placed it. Journaled
        and published (the gateway answers 503 + Retry-After, `status` shows the reason).
        Skipped while an operation runs: it owns the states of the models it touches."""
        ctx = self._ctx
        if not self._ready.is_set() or not self._lock.acquire(blocking=False):
            return []
        try:
            if not ctx.ports.routes.is_open():
                # The registry restarted without its saved state (a store that lost it):
                # rebuild its table from the journal's desired state, then let it publish.
                republish(ctx)
                ctx.journal.append({"event": "registry_rebuilt", "at": now()})
                log.warning("the registry had lost its table; rebuilt from the journal")
            # A parked model runs no replica by design: nothing to watch.
            models = {n: m for n, m in ctx.desired.state.models.items() if not m.parked}
            table = ctx.ports.routes.routing_table()
            published = {n: table.models[n].state for n in models if n in table.models}
            app_of = {n: m.app.app for n, m in models.items()}
            changes = health_changes(published, app_of, ctx.ports.serve.running_replicas())
            for change in changes:
                error = change.reason if change.state is ModelState.DEGRADED else None
                ctx.ports.routes.set_route_state(change.name, change.state, error)
                ctx.journal.append({"event": "health", **change.to_json(), "at": now()})
                log.warning("%s is %s: %s", change.name, change.state.value, change.reason)
            return changes
        finally:
            self._lock.release()

    def park_idle(self) -> list[OperationResult]:
        """One pass of idle parking: every on-demand model with no request for its
        `park_after_idle_s` is parked (its next request wakes it). Skipped while an
        operation runs, like the health watch."""
        models = self._ctx.desired.state.models.values()
        # Nothing the registry could say would park an `always` or a parked model: skip
        # asking it, on every health pass of a fleet without on-demand models.
        if not any(m.requested.residency is Residency.ON_DEMAND and not m.parked for m in models):
            return []
        if not self._ready.is_set() or not self._lock.acquire(blocking=False):
            return []
        try:
            idle = idle_to_park(resident_models(self._ctx))
            return [park(self._ctx, self._begin, name, ParkReason.IDLE) for name in idle]
        finally:
            self._current = None
            self._lock.release()

    # ------------------------------------------------------------------ restart
    def reconcile(self) -> str:
        """Make Serve, the registry and the desired state agree after a (re)start; until it
        has run, operations wait."""
        try:
            while True:
                try:
                    message = reconcile(self._ctx)
                    break
                except RoutesUnavailable as exc:
                    # The registry comes back with the head; reconciling without it would
                    # open operations on a fleet nobody checked.
                    log.warning("reconcile waits for the registry: %s", exc)
            log.info("reconciled: %s", message)
            return message
        finally:
            self._ready.set()
