"""Serve stood in by a record of applications, with a kill switch at named points.

The fleet manager's restart logic is exercised against the real registry actor, the real
journal, the real admission policy and real staging; only what would start a vLLM engine
(Serve applications, the warm-up request) is replaced, because every real swap phase costs
one to two engine starts (minutes here) and there are seven kill points. The real-stack kill
in `deploying_new` is tests/e2e/test_hot_swap.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster.fleet_manager import ClusterView
from cluster.journal import Journal
from cluster.model_deployer import DeployFailed, DeployResult, ModelDeployer
from domain.deployment_config import ModelDeploymentConfig
from domain.model_state import ModelState

RUNNING = "RUNNING"
DEPLOYING = "DEPLOYING"
UNHEALTHY = "UNHEALTHY"
"""Serve's status while an application has lost its replicas and is re-placing them."""


class Killed(BaseException):
    """The manager process died here. A BaseException, so no `except Exception` in the
    manager can swallow it: nothing after the kill point runs, exactly as with SIGKILL."""


@dataclass
class KillSwitch:
    """Fires once when the manager reaches `point` for model `model` (None: any model)."""

    point: str | None = None
    model: str | None = None
    fired: bool = False

    def check(self, point: str, model: str | None = None) -> None:
        if self.fired or point != self.point:
            return
        if self.model is not None and model != self.model:
            return
        self.fired = True
        raise Killed(f"killed at {point} ({model})")


@dataclass
class ServeApps:
    """Application name -> status, as `serve.status()` would report them."""

    apps: dict[str, str] = field(default_factory=dict)
    deployed: list[str] = field(default_factory=list)
    """Every model name a deploy was started for, in order (each is an engine start)."""


class StandInDeployer(ModelDeployer):
    """ModelDeployer with Serve replaced by `ServeApps`; registry calls are the real ones."""

    def __init__(
        self,
        registry: Any,
        serve: ServeApps,
        kill: KillSwitch,
        materialize: Callable[[str], Path],
    ) -> None:
        super().__init__(registry, materialize)
        self._serve = serve
        self._kill = kill

    def deploy(self, config: ModelDeploymentConfig, *, timeout_s: float) -> DeployResult:
        import ray

        self._kill.check("deploy:before", config.name)
        ray.get(self._registry.put_model.remote(self.route(config, ModelState.LOADING)))
        self._serve.apps[config.app_name] = DEPLOYING
        self._serve.deployed.append(config.name)
        self._kill.check("deploy:starting", config.name)
        self._serve.apps[config.app_name] = RUNNING
        route = self.route(config, ModelState.READY)
        ray.get(self._registry.put_model.remote(route))
        for alias in config.aliases:
            ray.get(self._registry.set_alias.remote(alias, config.name))
        return DeployResult(route, Path("/nonexistent"), 0.0)

    def delete_app(self, app_name: str) -> None:  # type: ignore[override]
        self._serve.apps.pop(app_name, None)


class StandInCluster(ClusterView):
    """ClusterView with the Serve-facing calls answered from `ServeApps`; inventory,
    placement-group accounting, draining (through the registry) and staging stay real."""

    def __init__(
        self,
        registry: Any,
        materialize: Callable[[str], Path],
        serve: ServeApps,
        kill: KillSwitch,
        *,
        fail_warm_up: frozenset[str] = frozenset(),
        staging_error: Mapping[str, Exception] | None = None,
    ) -> None:
        super().__init__(registry, materialize)
        self._serve = serve
        self._kill = kill
        self._fail_warm_up = fail_warm_up
        self._staging_error = dict(staging_error or {})

    def materialize(self, source: str) -> Path:
        self._kill.check("staging", source)
        if source in self._staging_error:
            raise self._staging_error[source]
        return super().materialize(source)

    def drain(self, name: str, timeout_s: float) -> int:
        self._kill.check("drain", name)
        return super().drain(name, timeout_s)

    def wait_freed(
        self, config: ModelDeploymentConfig, freed: Mapping[str, int], timeout_s: float
    ) -> bool:
        self._kill.check("wait_freed", config.name)
        return super().wait_freed(config, freed, timeout_s)

    def existing_apps(self) -> set[str]:
        return set(self._serve.apps)

    def running_apps(self) -> set[str]:
        return {name for name, status in self._serve.apps.items() if status == RUNNING}

    def running_replicas(self) -> dict[str, int]:
        return {name: int(status == RUNNING) for name, status in self._serve.apps.items()}

    def warm_up(self, config: ModelDeploymentConfig, timeout_s: float) -> None:
        self._kill.check("warm_up", config.name)
        if config.name in self._fail_warm_up:
            raise DeployFailed("warm-up request failed: engine died (injected)")


class KillingJournal(Journal):
    """The real journal; the kill switch fires right after an entry or snapshot is durable."""

    def __init__(self, state_dir: Path, kill: KillSwitch) -> None:
        super().__init__(state_dir)
        self._kill = kill

    def append(self, entry: dict[str, Any]) -> None:
        super().append(entry)
        if entry.get("event") == "phase":
            self._kill.check(f"journaled:{entry.get('phase')}")

    def save_snapshot(self, snapshot: dict[str, Any]) -> None:
        super().save_snapshot(snapshot)
        self._kill.check("snapshot_saved")
