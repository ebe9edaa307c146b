"""Ray wiring of the fleet manager: a detached, named actor on the head node."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cluster.fleet_manager import MANAGER_ACTOR_NAME, ClusterView, FleetManager, ManagerSettings
from cluster.fleet_metrics import RayFleetMetrics
from cluster.fleet_sampler import FleetSampler
from cluster.journal import Journal
from cluster.model_deployer import ModelDeployer
from cluster.model_materializer import staged_model_path
from cluster.ray_runtime import LOCAL_HEAD_MARKER
from serve_apps.registry import SWITCHYARD_NAMESPACE, registry_actor

log = logging.getLogger(__name__)


class ManagerService:
    """Composes a FleetManager inside the actor and exposes its calls."""

    def __init__(self, settings_json: str) -> None:
        settings = ManagerSettings.model_validate_json(settings_json)
        self._settings = settings
        registry = registry_actor()
        # Created here, inside the actor: Ray metrics belong to the process that records them.
        metrics = RayFleetMetrics()
        materialize = staged_model_path(settings.state_dir)
        self._manager = FleetManager(
            settings,
            registry,
            ModelDeployer(registry, materialize, logs_dir=_ray_logs_dir(settings.state_dir)),
            Journal(settings.state_dir / "manager"),
            ClusterView(registry, materialize),
            metrics=metrics,
        )
        # Gauges (states, aliases, accelerators, disk) are sampled, and re-sent, on a period.
        FleetSampler(
            metrics, registry, settings.accelerator, settings.state_dir / "cache", period_s=5.0
        ).start()
        # Reconcile in the background: a restart may need to redeploy a model (minutes),
        # and the actor must answer `current`/`fleet` meanwhile.
        threading.Thread(target=self._manager.reconcile, daemon=True).start()
        threading.Thread(target=self._watch_health, daemon=True).start()

    def _watch_health(self) -> None:
        """Mark models DEGRADED / READY from their running replicas, for the actor's life."""
        period = self._settings.health_period_s
        while True:
            if self._manager.wait_ready(period):
                try:
                    self._manager.check_health()
                except Exception:
                    log.exception("health check failed; retrying in %.0f s", period)
            time.sleep(period)

    def ping(self) -> bool:
        return self._manager.wait_ready(0)

    def run(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return self._manager.run(self._with_defaults(request))

    def _with_defaults(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Fill what a CLI request leaves to the cluster: the accelerator kind, CPU eager."""
        request = dict(request)
        if "config" in request:
            config = dict(request["config"])
            config.setdefault("accelerator", self._settings.accelerator.model_dump(mode="json"))
            if config["accelerator"].get("kind") == "cpu":
                engine = dict(config.get("engine") or {})
                engine.setdefault("enforce_eager", True)
                config["engine"] = engine
            request["config"] = config
        return request

    def events(self, since: int = 0) -> list[dict[str, Any]]:
        return self._manager.events(since)

    def current(self) -> dict[str, Any] | None:
        return self._manager.current()

    def fleet(self) -> dict[str, Any]:
        return self._manager.fleet()

    def inventory(self) -> dict[str, Any]:
        return self._manager.inventory()


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
        resources={"node:__internal_head__": 0.001},
        max_restarts=-1,
        # An operation is never retried blindly after a crash: `reconcile` decides.
        max_task_retries=0,
        max_concurrency=8,
    ).remote(settings.model_dump_json())
