"""`ServePort` on Ray Serve: a model's Serve application, its status and its accelerators.

Runs in the manager actor (a Ray driver). Publishes nothing to the registry: the fleet
engine decides what clients see, and when.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from cluster.fleet.ports import (
    AppStatus,
    Clock,
    Deployed,
    DeployFailed,
    StartReport,
    SystemClock,
    wait_for,
)
from cluster.fleet.startup_steps import (
    EngineLog,
    WorkerTimes,
    parse_engine_log,
    startup_steps,
)
from cluster.ray_adapters.engine_error import summarize_failure
from cluster.ray_adapters.engine_log_capacity import logged_capacity
from cluster.ray_adapters.placement_check import placement_problem
from domain.accelerator_sharing import shares_accelerators
from domain.app_name import AppName
from domain.deployment_config import ModelDeploymentConfig
from domain.engine_capacity import CapacityFigures
from serve_apps.engine.fake_engine import FakeEngineSettings
from serve_apps.engine.placement_bundles import placement_for
from serve_apps.engine.weights_locator import WeightsLocator
from serve_apps.internals import (
    app_of_placement_group,
    available_resources_per_node,
    call_every_replica,
    replica_actor_class_name,
    running_replicas_in,
    start_deleting_app,
)

log = logging.getLogger(__name__)

DELETE_TIMEOUT_S = 60.0
"""As long as Serve's own blocking delete waits."""

# Serve's ApplicationStatus values -> what the fleet engine distinguishes.
_STATUS = {
    "NOT_STARTED": AppStatus.DEPLOYING,
    "DEPLOYING": AppStatus.DEPLOYING,
    "RUNNING": AppStatus.RUNNING,
    "UNHEALTHY": AppStatus.UNHEALTHY,
    "DEPLOY_FAILED": AppStatus.FAILED,
    "DELETING": AppStatus.DELETING,
}


class ServeControl:
    def __init__(
        self,
        *,
        logs_dir: Path | None = None,
        poll_s: float = 0.2,
        clock: Clock | None = None,
        fake_engines: FakeEngineSettings | None = None,
    ) -> None:
        # Where Ray writes this node's worker logs: the engine's root cause is found there.
        self._logs_dir = logs_dir
        self._fake_engines = fake_engines
        self._poll_s = poll_s
        self._clock = clock or SystemClock()

    def placement_problem(self, config: ModelDeploymentConfig) -> str | None:
        shared = shares_accelerators(config, stand_in_engine=self._fake_engines is not None)
        spec = placement_for(
            config.layout, config.accelerator, planned=config.placement, shared=shared
        )
        # Ray Serve LLM adds the replica actor's own CPU to the first bundle.
        first = dict(spec.bundles[0])
        first["CPU"] = first.get("CPU", 0.0) + 1.0
        spec = replace(spec, bundles=(first, *spec.bundles[1:]))
        return placement_problem(spec, available_resources_per_node(), replicas=config.replicas)

    def start_deploy(
        self,
        app: AppName,
        config: ModelDeploymentConfig,
        model_path: Path,
        weights: WeightsLocator | None = None,
    ) -> float:
        from ray import serve
        from ray.serve.api import RunTarget

        started = time.time()
        try:
            target = self._build(app, config, model_path, weights)
            serve.run_many(
                [RunTarget(target=target, name=app.app, route_prefix=None)],
                wait_for_applications_running=False,
            )
        except Exception as exc:
            raise self._failed(app, exc) from exc
        return started

    def wait_deployed(self, app: AppName, started_at: float, timeout_s: float) -> Deployed:
        try:
            self._wait_running(app.app, timeout_s)
        except Exception as exc:
            raise self._failed(app, exc) from exc
        return Deployed(started_at=started_at, running_at=time.time())

    def _failed(self, app: AppName, exc: Exception) -> DeployFailed:
        message = summarize_failure(str(exc) or type(exc).__name__, self._logs_dir)
        log.error("deploying %s failed: %s", app, message)
        self.delete(app.app)
        return DeployFailed(message)

    def start_report(self, app: AppName, deployed: Deployed, warm_up_s: float) -> StartReport:
        """From Ray's state API: the replica's worker timestamps and its log (the engine's
        lines included), read once. What cannot be read is left out, with a warning."""
        worker: WorkerTimes | None = None
        engine: EngineLog | None = None
        capacity = CapacityFigures()
        try:
            worker, lines = _replica_reports(app)
            engine = parse_engine_log(lines, datetime.fromtimestamp(deployed.started_at).year)
            capacity = logged_capacity(lines)
        except Exception as exc:
            log.warning("could not read how %s started: %r", app, exc)
        steps = startup_steps(
            deploy_started=deployed.started_at,
            running=deployed.running_at,
            worker=worker,
            engine=engine,
            warm_up_s=warm_up_s,
        )
        return StartReport(steps=steps, capacity=capacity)

    def _build(
        self,
        app: AppName,
        config: ModelDeploymentConfig,
        model_path: Path,
        weights: WeightsLocator | None,
    ) -> Any:
        if self._fake_engines is not None:
            from serve_apps.engine.fake_engine_replica import build_fake_engine_app

            return build_fake_engine_app(app, config, model_path, self._fake_engines, weights)
        from serve_apps.engine.model_app import build_model_app
        from serve_apps.engine.serve_llm_imports import pairing_problem

        # `up` checked its own install; a job's `add` may run beside another one.
        problem = pairing_problem()
        if problem is not None:
            raise DeployFailed(problem)
        return build_model_app(app, config, model_path, weights)

    def _wait_running(self, app_name: str, timeout_s: float) -> None:
        from ray import serve

        def running() -> bool | None:
            app = serve.status().applications.get(app_name)
            if app is None:
                return None
            status = _status_of(app)
            if status is AppStatus.RUNNING:
                return True
            if status in (AppStatus.FAILED, AppStatus.UNHEALTHY):
                raise DeployFailed(_deployment_errors(app) or app.message)
            # Serve keeps retrying a replica whose constructor raises; surface the
            # engine's error as soon as Serve reports one, not after the timeout.
            errors = _deployment_errors(app)
            if errors and "failed" in errors.lower():
                raise DeployFailed(errors)
            return None

        if wait_for(running, timeout_s=timeout_s, poll_s=self._poll_s, clock=self._clock) is None:
            raise DeployFailed(f"{app_name} was not running after {timeout_s:g} s")

    def warm_up(self, app: AppName, timeout_s: float) -> None:
        from ray import serve

        handle = serve.get_deployment_handle(app.deployment, app.app)
        request = self._warm_up_request(app)

        def ask() -> Any:
            stream: Any = handle.options(stream=True).completions.remote(request, None)
            for item in stream:
                return item
            return None

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            try:
                reply = pool.submit(ask).result(timeout=timeout_s)
            except concurrent.futures.TimeoutError:
                raise DeployFailed(f"warm-up request got no answer in {timeout_s:g} s") from None
            except Exception as exc:
                raise DeployFailed(f"warm-up request failed: {exc}") from exc
        error = getattr(reply, "error", None)
        if reply is None or error is not None:
            raise DeployFailed(f"warm-up request failed: {getattr(error, 'message', reply)}")

    def _warm_up_request(self, app: AppName) -> Any:
        body = {"model": app.model, "prompt": "Hello", "max_tokens": 1}
        if self._fake_engines is not None:
            # A fake engine takes the plain body: vLLM's request model would make both this
            # process and the replica import vLLM (tens of seconds) for one request.
            return body
        from ray.serve.llm.openai_api_models import CompletionRequest

        return CompletionRequest(**body)

    def delete(self, app: str) -> None:
        """Delete `app` and wait until Serve no longer lists it, polling at `poll_s` (Serve's
        own blocking delete polls once a second: see `start_deleting_app`)."""
        from ray import serve

        def gone() -> bool | None:
            return True if app not in serve.status().applications else None

        try:
            start_deleting_app(app)
            if wait_for(gone, timeout_s=DELETE_TIMEOUT_S, poll_s=self._poll_s, clock=self._clock):
                return
            log.error("Serve still lists %s %g s after its deletion", app, DELETE_TIMEOUT_S)
        except Exception:
            log.exception("could not delete Serve application %s", app)

    def sleep(self, app: AppName, level: int) -> None:
        self._every_replica(app, "sleep", {"level": level})

    def wake(self, app: AppName, level: int) -> None:
        if level == 1:
            self._every_replica(app, "wakeup", {})
            return
        # Level 2 discarded the weights, and vLLM's wake_up restores buffers, not weights:
        # their memory first, each worker's reload, then the KV cache (docs/sleep-mode.md).
        self._every_replica(app, "wakeup", {"tags": ["weights"]})
        self._every_replica(app, "collective_rpc", {"method": "reload_weights"})
        self._every_replica(app, "wakeup", {"tags": ["kv_cache"]})

    def _every_replica(self, app: AppName, method: str, kwargs: dict[str, Any]) -> None:
        try:
            call_every_replica(app.app, app.deployment, method, kwargs)
        except Exception as exc:
            raise DeployFailed(f"{method} on {app} failed: {exc}") from exc

    def statuses(self) -> dict[str, AppStatus]:
        from ray import serve

        return {name: _status_of(app) for name, app in serve.status().applications.items()}

    def running_replicas(self) -> dict[str, int]:
        from ray import serve

        return {
            name: sum(running_replicas_in(d) for d in app.deployments.values())
            for name, app in serve.status().applications.items()
        }

    def claimed_by(self, app: str, resource: str) -> dict[str, int]:
        from ray.util.placement_group import placement_group_table

        # Ranks: a rank of a sleep-mode engine holds half an accelerator.
        claimed: dict[str, int] = {}
        for group in placement_group_table().values():
            if group.get("state") != "CREATED" or app_of_placement_group(group["name"]) != app:
                continue
            for index, bundle in group["bundles"].items():
                node = group["bundles_to_node_id"].get(index)
                if node and bundle.get(resource):
                    ranks = max(1, int(bundle[resource]))
                    claimed[node[:12]] = claimed.get(node[:12], 0) + ranks
        return claimed

    def wait_freed(self, freed: Mapping[str, int], resource: str, timeout_s: float) -> bool:
        def all_free() -> bool | None:
            available = available_resources_per_node()
            seen = all(
                any(
                    node_id.startswith(node) and res.get(resource, 0) >= count
                    for node_id, res in available.items()
                )
                for node, count in freed.items()
            )
            return True if seen else None

        found = wait_for(all_free, timeout_s=timeout_s, poll_s=0.5, clock=self._clock)
        return found is not None


def _replica_reports(app: AppName) -> tuple[WorkerTimes | None, list[str]]:
    """A replica's worker timestamps and log lines (its engine's too)."""
    from ray.util.state import get_log, list_actors, list_workers

    class_name = replica_actor_class_name(app.app, app.deployment)
    actors = list_actors(filters=[("class_name", "=", class_name)], detail=True, timeout=10)
    alive = [a for a in actors if a.state == "ALIVE"] or list(actors)
    if not alive:
        return None, []
    actor = alive[-1]  # a new app's replicas all start together; any one tells
    worker = None
    if actor.pid:
        workers = list_workers(filters=[("pid", "=", actor.pid)], detail=True, timeout=10)
        if workers:
            launched = workers[0].worker_launch_time_ms
            ready = workers[0].start_time_ms
            if launched and launched > 0 and ready and ready > 0:
                worker = WorkerTimes(launch_requested=launched / 1000, ready=ready / 1000)
    lines = list(get_log(actor_id=actor.actor_id, suffix="out", tail=5000, timeout=10))
    return worker, [line for chunk in lines for line in chunk.splitlines()]


def _status_of(app: Any) -> AppStatus:
    # ApplicationStatus is a (str, Enum): str() of it is "ApplicationStatus.RUNNING".
    status = app.status
    return _STATUS.get(str(getattr(status, "value", status)), AppStatus.DEPLOYING)


def _deployment_errors(app: Any) -> str:
    messages = [d.message for d in app.deployments.values() if getattr(d, "message", "")]
    return " | ".join(messages)
