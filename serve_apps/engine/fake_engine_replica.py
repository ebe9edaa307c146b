"""The fake engine replica: `fake_engine.py` deployed exactly where a vLLM replica would be.

Same Serve application and deployment names, same placement group (so admission, claimed
accelerators and frees behave as with real engines), same registry entry and token-guarded
direct HTTP port (`endpoint_registration.py`), same handle methods for the manager's warm-up
and the gateway's fallback path. Starts in about a second instead of 25-50 s.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domain.accelerator_sharing import shares_accelerators
from domain.app_name import AppName
from domain.deployment_config import ModelDeploymentConfig
from serve_apps.engine.endpoint_registration import DirectEndpoint
from serve_apps.engine.fake_engine import (
    FakeEngine,
    FakeEngineError,
    FakeEngineSettings,
    check_checkpoint,
    fake_engine_app,
    token_counter,
)
from serve_apps.engine.placement_bundles import placement_for
from serve_apps.engine.weights_locator import WeightsLocator

if TYPE_CHECKING:
    from ray.serve.deployment import Application


@dataclass(frozen=True)
class _ErrorInfo:
    message: str
    code: int
    type: str = "BadRequestError"
    param: str | None = None


@dataclass(frozen=True)
class _ErrorResponse:
    """What an `LLMServer` handle yields for a refused request (vLLM's ErrorResponse)."""

    error: _ErrorInfo


class FakeEngineReplica:
    # Serve awaits an async constructor: the replica counts as started once it listens.
    async def __init__(  # type: ignore[misc]
        self,
        model: str,
        model_path: str,
        settings_json: str,
        health_period_s: float,
        weights: WeightsLocator | None = None,
    ) -> None:
        settings = FakeEngineSettings.model_validate_json(settings_json)
        # Found on this node like a vLLM replica's (staged here first if missing).
        directory = (
            Path(model_path) if weights is None else await asyncio.to_thread(weights.local_path)
        )
        check_checkpoint(directory)
        self._settings = settings
        self._asleep: int | None = None
        self._weights_discarded = False
        await asyncio.sleep(settings.start_s)
        self._engine = FakeEngine(model, settings, token_counter(directory))
        self._direct = DirectEndpoint()
        await self._direct.start(fake_engine_app(self._engine), health_period_s)

    async def check_health(self) -> None:
        if not self._direct.serving:
            raise RuntimeError("the fake engine's HTTP server stopped")
        await self._direct.register()

    # vLLM's sleep mode as Ray Serve LLM's LLMServer exposes it (sleep, wakeup, is_sleeping,
    # collective_rpc for reload_weights), taking the configured times.
    async def sleep(self, level: int = 1) -> None:
        if self._asleep is None:
            await asyncio.sleep(self._settings.sleep_s)
            self._asleep = level

    async def wakeup(self, tags: list[str] | None = None) -> None:
        if self._asleep is None:
            return
        if tags is None or "weights" in tags:
            await asyncio.sleep(self._settings.wake_s)
            self._weights_discarded = self._asleep == 2
        if tags is None or "kv_cache" in tags:
            if self._weights_discarded:
                raise RuntimeError("the KV cache woken before the weights were reloaded")
            self._asleep = None

    async def is_sleeping(self) -> bool:
        return self._asleep is not None

    async def collective_rpc(self, method: str, **_: Any) -> list[Any]:
        if method != "reload_weights":
            raise ValueError(f"the fake engine has no worker method {method!r}")
        if self._weights_discarded:
            await asyncio.sleep(self._settings.reload_s)
            self._weights_discarded = False
        return [None]

    async def chat(self, request: Any, raw_request_info: Any = None) -> AsyncIterator[Any]:
        async for item in self._answer("chat", request):
            yield item

    async def completions(self, request: Any, raw_request_info: Any = None) -> AsyncIterator[Any]:
        async for item in self._answer("completions", request):
            yield item

    async def _answer(self, kind: str, request: Any) -> AsyncIterator[Any]:
        body = request.model_dump(mode="json") if hasattr(request, "model_dump") else request
        body = json.loads(json.dumps(body))
        try:
            if body.get("stream"):
                self._engine.plan(kind, body)
                async for event in self._engine.stream(kind, body):
                    yield [event]
                return
            yield await self._engine.complete(kind, body)
        except FakeEngineError as exc:
            yield _ErrorResponse(_ErrorInfo(str(exc), exc.status, exc.body()["error"]["type"]))

    async def __del__(self) -> None:
        direct = getattr(self, "_direct", None)
        if direct is not None:
            await direct.stop()


def build_fake_engine_app(
    app: AppName,
    config: ModelDeploymentConfig,
    model_path: Path,
    settings: FakeEngineSettings,
    weights: WeightsLocator | None = None,
) -> Application:
    """The Serve application `app` with fake engine replicas, placed as vLLM's would be."""
    from ray import serve

    if config.engine.max_model_len is not None:
        settings = settings.model_copy(update={"max_model_len": config.engine.max_model_len})
    # The stand-in engine binds no device: its sleep-mode ranks may take half an
    # accelerator each (domain/accelerator_sharing.py `shares_accelerators`).
    shared = shares_accelerators(config, stand_in_engine=True)
    placement = placement_for(
        config.layout, config.accelerator, planned=config.placement, shared=shared
    )
    bundles = [dict(b) for b in placement.bundles]
    # Ray Serve LLM adds the replica actor's own CPU to the first bundle; so does this.
    bundles[0]["CPU"] = bundles[0].get("CPU", 0.0) + 1.0
    deployment = serve.deployment(
        name=app.deployment,
        num_replicas=config.replicas,
        ray_actor_options={"num_cpus": 1},
        placement_group_bundles=bundles,
        placement_group_strategy=placement.strategy,
        **placement.serve_deployment_options(),
        health_check_period_s=config.health_check_period_s,
        health_check_timeout_s=config.health_check_timeout_s,
        graceful_shutdown_timeout_s=30,
        graceful_shutdown_wait_loop_s=0.2,
        max_ongoing_requests=10_000,
    )(FakeEngineReplica)
    return deployment.bind(
        config.name,
        str(model_path),
        settings.model_dump_json(),
        config.health_check_period_s,
        weights,
    )
