"""The engine replica: Ray Serve LLM's `LLMServer` plus vLLM's own HTTP app on a port.

`LLMServer` keeps doing everything it does (engine start, health checks, engine metrics,
the handle methods the manager's warm-up and the gateway's fallback call). On top of it the
replica serves the same engine through vLLM's OpenAI app (the code `vllm serve` runs) on a
port of its node, and registers that address with the fleet registry so gateways can stream
from it without a Ray Serve handle hop per token (`endpoint_registration.py`). It also keeps
the engine's scheduler gauges exported while it is idle (`engine/idle_gauges.py`). Only
`model_app.py` refers to this class (as Ray Serve LLM's `deployment_cls`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ray import serve
from ray.serve.llm import LLMServer

from serve_apps.engine.endpoint_registration import DirectEndpoint
from serve_apps.engine.idle_gauges import IdleGaugeRepublisher, engine_idle_republisher
from serve_apps.engine.weights_locator import WeightsLocator
from serve_apps.internals import (
    ServeLogTargets,
    llm_server_asgi_app,
    llm_server_engine_client,
    llm_server_health_check_period_s,
    llm_server_load_from,
    metrics_report_interval_s,
)

log = logging.getLogger(__name__)


class DirectStreamingLLMServer(LLMServer):
    """`LLMServer` that also serves its engine over HTTP and registers the address."""

    _direct: DirectEndpoint | None = None
    _idle_gauges: IdleGaugeRepublisher | None = None
    _weights: WeightsLocator | None = None

    # Serve awaits an async constructor; LLMServer's own starts the engine (via `start`).
    async def __init__(  # type: ignore[misc]
        self, llm_config: Any, *, weights: WeightsLocator | None = None, **kwargs: Any
    ) -> None:
        self._weights = weights
        await super().__init__(llm_config, **kwargs)

    async def start(self) -> None:
        if self._weights is not None:
            # The weights on this node (staged here first if Ray placed the replica on a
            # node that lacks them), before vLLM reads a byte.
            model_dir = await asyncio.to_thread(self._weights.local_path)
            llm_server_load_from(self, str(model_dir))
        serve_log = ServeLogTargets.now()
        await super().start()  # type: ignore[no-untyped-call]
        if serve_log.restore():
            log.info("reopened Serve's replica log, which vLLM's logging setup had closed")
        self._start_idle_gauges()
        direct = DirectEndpoint()
        try:
            app = await llm_server_asgi_app(self)
            await direct.start(app, llm_server_health_check_period_s(self))
            self._direct = direct
        except Exception:
            # The replica still serves through its handle; only the fast path is missing.
            log.exception("could not start the direct HTTP endpoint; handle path only")

    def _start_idle_gauges(self) -> None:
        try:
            replica_id = serve.get_replica_context().replica_id.unique_id
            self._idle_gauges = engine_idle_republisher(
                llm_server_engine_client(self),
                replica_id,
                period_s=metrics_report_interval_s() / 2,
            )
            self._idle_gauges.start()
        except Exception:
            # The engine serves either way; only its idle gauges are missing from dashboards.
            log.exception("could not start the idle engine gauges")

    # Sleep and wake are asked of every replica, again after a manager restart: a replica
    # already so is left alone (vLLM's own calls are not idempotent).
    async def sleep(self, **kwargs: Any) -> None:
        if not await self.is_sleeping():
            await super().sleep(**kwargs)

    async def wakeup(self, **kwargs: Any) -> None:
        if await self.is_sleeping():
            await super().wakeup(**kwargs)

    async def check_health(self) -> None:
        await super().check_health()
        if self._direct is not None:
            await self._direct.register()

    async def __del__(self) -> None:
        if self._idle_gauges is not None:
            await self._idle_gauges.stop()
            self._idle_gauges = None
        if self._direct is not None:
            await self._direct.stop()
            self._direct = None
        await super().__del__()
