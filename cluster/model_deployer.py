"""Bringing one model up behind the gateway, and taking it down.

Runs in a Ray driver (the `switchyard` CLI, later the manager actor). Each step is
published to the registry first, so the gateway answers 503 (not 404) while a model loads
and `switchyard status` shows where a deployment is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster.engine_error import summarize_failure
from domain.deployment_config import ModelDeploymentConfig
from domain.model_state import ModelState
from serve_apps.routing_table import ModelRoute

log = logging.getLogger(__name__)

Materialize = Callable[[str], Path]
"""source text -> a local model directory (staged weights) on this node."""


class DeployFailed(Exception):
    """The model did not come up; the message carries the engine's own error."""


class PlacementRefused(DeployFailed):
    """The layout's placement group cannot be placed on the cluster as it is now."""


@dataclass(frozen=True)
class DeployResult:
    route: ModelRoute
    model_path: Path
    seconds: float


class ModelDeployer:
    def __init__(
        self,
        registry: Any,
        materialize: Materialize,
        *,
        poll_s: float = 1.0,
        logs_dir: Path | None = None,
    ) -> None:
        self._registry = registry
        self._materialize = materialize
        self._poll_s = poll_s
        # Where Ray writes this node's worker logs: the engine's root cause is found there.
        self._logs_dir = logs_dir

    def route(self, config: ModelDeploymentConfig, state: ModelState) -> ModelRoute:
        return ModelRoute(
            name=config.name,
            app_name=config.app_name,
            deployment_name=config.deployment_name,
            state=state,
            source=config.source,
            layout=str(config.layout),
            replicas=config.replicas * config.layout.dp,
        )

    def deploy(self, config: ModelDeploymentConfig, *, timeout_s: float) -> DeployResult:
        """Deploy and wait until RUNNING; on failure the app is deleted and FAILED recorded."""
        import ray
        from ray import serve
        from ray.serve.api import RunTarget

        from serve_apps.model_app import build_model_app

        started = time.monotonic()
        problem = self._placement_problem(config)
        if problem is not None:
            # Refused before anything exists: no LOADING entry, no Serve app.
            raise PlacementRefused(f"{config.name} ({config.layout}) cannot be placed: {problem}")
        ray.get(self._registry.put_model.remote(self.route(config, ModelState.LOADING)))
        try:
            model_path = self._materialize(config.source)
            app = build_model_app(config, model_path)
            serve.run_many(
                [RunTarget(target=app, name=config.app_name, route_prefix=None)],
                wait_for_applications_running=False,
            )
            self._wait_running(config.app_name, timeout_s)
        except Exception as exc:
            message = summarize_failure(str(exc) or type(exc).__name__, self._logs_dir)
            log.error("deploying %s failed: %s", config.name, message)
            ray.get(self._registry.set_state.remote(config.name, ModelState.FAILED, message))
            self.delete_app(config.app_name)
            raise DeployFailed(message) from exc
        route = self.route(config, ModelState.READY)
        ray.get(self._registry.put_model.remote(route))
        for alias in config.aliases:
            ray.get(self._registry.set_alias.remote(alias, config.name))
        return DeployResult(route, model_path, time.monotonic() - started)

    @staticmethod
    def _placement_problem(config: ModelDeploymentConfig) -> str | None:
        from ray._private.state import available_resources_per_node

        from cluster.placement_check import placement_problem
        from serve_apps.placement import placement_for

        spec = placement_for(config.layout, config.accelerator)
        # Ray Serve LLM adds the replica actor's own CPU to the first bundle.
        first = dict(spec.bundles[0])
        first["CPU"] = first.get("CPU", 0.0) + 1.0
        spec = type(spec)(bundles=(first, *spec.bundles[1:]), strategy=spec.strategy)
        nodes = list(available_resources_per_node().values())  # type: ignore[no-untyped-call]
        return placement_problem(spec, nodes, replicas=config.replicas * config.layout.dp)

    def _wait_running(self, app_name: str, timeout_s: float) -> None:
        from ray import serve
        from ray.serve.schema import ApplicationStatus

        deadline = time.monotonic() + timeout_s
        while True:
            app = serve.status().applications.get(app_name)
            if app is not None:
                if app.status == ApplicationStatus.RUNNING:
                    return
                if app.status == ApplicationStatus.DEPLOY_FAILED:
                    raise DeployFailed(_deployment_errors(app) or app.message)
                if app.status == ApplicationStatus.UNHEALTHY:
                    raise DeployFailed(_deployment_errors(app) or app.message)
                # Serve keeps retrying a replica whose constructor raises; surface the
                # engine's error as soon as Serve reports one, not after the timeout.
                errors = _deployment_errors(app)
                if errors and "failed" in errors.lower():
                    raise DeployFailed(errors)
            if time.monotonic() > deadline:
                raise DeployFailed(f"{app_name} was not running after {timeout_s:g} s")
            time.sleep(self._poll_s)

    def remove(self, name: str, *, replaced_by: str | None = None) -> None:
        import ray

        ray.get(self._registry.remove_model.remote(name, replaced_by))
        self.delete_app(f"model-{name}")

    @staticmethod
    def delete_app(app_name: str) -> None:
        from ray import serve

        try:
            serve.delete(app_name, _blocking=True)
        except Exception:
            log.exception("could not delete Serve application %s", app_name)


def _deployment_errors(app: Any) -> str:
    messages = [d.message for d in app.deployments.values() if getattr(d, "message", "")]
    return " | ".join(messages)
