"""The composition of the fleet manager on Ray: a detached, named actor on the head node.

`ManagerService` wires the fleet engine to the Ray and Serve adapters of its ports, starts
the metrics sampler, the restart reconcile and the health watch, and exposes the engine's
calls. The only place the engine meets Ray.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

from cluster.fleet.fleet_engine import FleetEngine
from cluster.fleet.fleet_plan import FleetPlan
from cluster.fleet.journal import Journal
from cluster.fleet.manager_settings import ManagerSettings
from cluster.fleet.ports import ClusterPorts
from cluster.fleet.wake_on_request import WakeOnRequest
from cluster.ray_adapters.ingress_liveness import alive_node_ids, running_replicas_or_none
from cluster.ray_adapters.ray_nodes import RayNodes
from cluster.ray_adapters.registry_routes import RegistryRoutes
from cluster.ray_adapters.serve_control import ServeControl
from cluster.startup.ray_runtime import LOCAL_HEAD_MARKER, advertised_address
from cluster.telemetry.gauge_sampler import FleetSampler
from cluster.telemetry.live_stats_sampler import LiveStatsSampler
from cluster.telemetry.metrics_targets import service_discovery_file
from cluster.telemetry.ray_fleet_metrics import RayFleetMetrics
from cluster.telemetry.status_publisher import ManagerStatusSource, StatusPublisher
from domain.fleet_file import FleetFile, FleetModelEntry
from domain.fleet_state import FleetState
from domain.operation import OperationEvent, OperationResult, RunningOperation
from domain.operation_request import OperationRequest
from domain.status_report import ManagerStatus
from serve_apps.internals import head_node_resources
from serve_apps.registry.registry_actor import SWITCHYARD_NAMESPACE, registry_actor

log = logging.getLogger(__name__)

MANAGER_ACTOR_NAME = "switchyard-manager"
WAKE_POLL_S = 10.0
"""How long one long-poll of the registry for wake requests waits."""


class ManagerService:
    """Composes a FleetEngine inside the actor and exposes its calls."""

    def __init__(self, settings_json: str) -> None:
        # Ray Serve imported once, here, before any thread of this actor can: two threads
        # importing it at once meet its circular imports half-initialized (ImportError in
        # one, then broken calls to Serve's controller in both).
        import ray.serve  # noqa: F401

        settings = ManagerSettings.model_validate_json(settings_json)
        self._settings = settings
        registry = registry_actor()
        # Created here, inside the actor: Ray metrics belong to the process that records them.
        metrics = RayFleetMetrics()
        ports = ClusterPorts(
            routes=RegistryRoutes(registry),
            serve=ServeControl(
                logs_dir=_ray_logs_dir(settings.state_dir), fake_engines=settings.fake_engines
            ),
            nodes=RayNodes(settings),
        )
        self._engine = FleetEngine(settings, ports, Journal(settings.manager_dir), metrics)
        # Gauges (states, aliases, accelerators, disk) are sampled, and re-sent, on a period.
        FleetSampler(
            metrics,
            registry,
            settings.accelerator,
            settings.staging.cache_dir,
            period_s=5.0,
            capacity=lambda: self._engine.fleet().capacity,
        ).start()
        # The gateways' live figures for `status`, sampled here so it never waits for them.
        self._live = LiveStatsSampler(lambda: service_discovery_file(settings.state_dir))
        self._live.start()
        # The gateway's status route answers from the registry's copy of this view.
        self._status = ManagerStatusSource(
            self._engine,
            address=advertised_address(),
            live=self._live.latest,
            liveness=lambda: (alive_node_ids(), running_replicas_or_none()),
        )
        self._publisher = StatusPublisher(
            self._status, lambda status: _publish_status(registry, status)
        )
        self._publisher.start()
        # Reconcile in the background: a restart may need to redeploy a model (minutes),
        # and the actor must answer `current`/`fleet` meanwhile.
        threading.Thread(target=self._engine.reconcile, daemon=True).start()
        threading.Thread(target=self._watch_health, daemon=True).start()
        self._wakes = WakeOnRequest(self._engine, ports.routes)
        threading.Thread(target=self._wake_on_request, daemon=True).start()

    def _watch_health(self) -> None:
        """Mark models DEGRADED / READY from their running replicas, and park idle on-demand
        models, for the actor's life."""
        period = self._settings.health_period_s
        while True:
            if self._engine.wait_ready(period):
                try:
                    self._engine.check_health()
                    self._engine.park_idle()
                except Exception:
                    log.exception("health check failed; retrying in %.0f s", period)
            time.sleep(period)

    def _wake_on_request(self) -> None:
        """Start the wakes gateways ask for (cluster/fleet/wake_on_request.py), for the
        actor's life, once reconciled."""
        while not self._engine.wait_ready(60.0):
            pass
        while True:
            try:
                self._wakes.serve_once(WAKE_POLL_S)
            except Exception:
                log.exception("taking wake requests failed; retrying in 1 s")
                time.sleep(1.0)

    def ping(self) -> bool:
        return self._engine.wait_ready(0)

    def identity(self) -> str:
        """This actor's id: which manager answered, when clusters share a machine."""
        import ray

        actor_id: str = ray.get_runtime_context().get_actor_id() or ""
        return actor_id

    def run(self, request: OperationRequest) -> OperationResult:
        try:
            return self._engine.run(request)
        finally:
            # At once, beside the caller hearing the outcome: a `status` through the
            # gateway right after an operation shows it, not the view of a period ago.
            self._publisher.publish_soon()

    def events(self, since: int = 0) -> list[OperationEvent]:
        return self._engine.events(since)

    def current(self) -> RunningOperation | None:
        return self._engine.current()

    def fleet(self) -> FleetState:
        return self._engine.fleet()

    def status(self) -> ManagerStatus:
        """The manager's part of `status`, with the inventory probed now."""
        return self._status.take(fresh_inventory=True)

    def plan_fleet(self, desired: FleetFile) -> FleetPlan:
        return self._engine.plan(desired)

    def export_fleet(self) -> list[FleetModelEntry]:
        return self._engine.export()

    def record_apply(self, record: dict[str, Any]) -> None:
        self._engine.record_apply(record)


def _publish_status(registry: Any, status: ManagerStatus) -> None:
    import ray

    ray.get(registry.set_manager_status.remote(status), timeout=3.0)


def _ray_logs_dir(state_dir: Path) -> Path | None:
    """This head's Ray log directory: recorded by `up` for a local head, else Ray's latest."""
    marker = state_dir / LOCAL_HEAD_MARKER
    if marker.exists():
        session = json.loads(marker.read_text()).get("session_dir")
        if session:
            return Path(session) / "logs"
    latest = Path("/tmp/ray/session_latest/logs")
    return latest if latest.is_dir() else None


def manager_actor(settings: ManagerSettings | None = None) -> Any:
    """The manager actor; created (pinned to the head node) when `settings` are given."""
    import ray

    if settings is None:
        return ray.get_actor(MANAGER_ACTOR_NAME, namespace=SWITCHYARD_NAMESPACE)
    actor_cls = ray.remote(ManagerService)
    return actor_cls.options(
        name=MANAGER_ACTOR_NAME,
        namespace=SWITCHYARD_NAMESPACE,
        lifetime="detached",
        get_if_exists=True,
        num_cpus=0,
        # The journal and snapshot live on the head node's disk.
        resources=head_node_resources(),
        max_restarts=-1,
        # An operation is never retried blindly after a crash: `reconcile` decides.
        max_task_retries=0,
        max_concurrency=8,
    ).remote(settings.model_dump_json())
