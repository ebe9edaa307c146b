"""The gateway's fast data path: stream from an engine replica's own HTTP port.

The replica serves vLLM's OpenAI app next to its Serve handle (`engine/vllm_replica.py`)
and registers the address (`engine_endpoint.py`). This backend posts the client's body there
and passes the bytes on undecoded, whole SSE events at a time; when a model has no known
endpoint, or its endpoint refuses the connection before answering, the request goes
through the Serve handle instead (nothing was sent yet, so that is safe). A stream that
breaks after it began is not retried: its tokens already reached the client.

Among a model's healthy endpoints, requests sharing a `prompt_cache_key` (or `user`) go to
the same replica, for vLLM's prefix cache, unless it is busier than the least loaded one by
more than a small slack; others go to the least loaded (`replica_affinity.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from serve_apps.gateway.http_errors import engine_failure_is_transient
from serve_apps.loop_tasks import PeriodicRefresh
from serve_apps.registry.engine_endpoint import EngineEndpoint
from serve_apps.registry.routing_table import ModelRoute
from serve_apps.relay.direct_stream import DirectStream
from serve_apps.relay.engine_connections import EngineConnections, EngineUnreachable
from serve_apps.relay.engine_events import EngineHttpError
from serve_apps.relay.model_backend import Method, ModelBackend
from serve_apps.relay.replica_affinity import affinity_key, choose_endpoint

log = logging.getLogger(__name__)

FetchEndpoints = Callable[[], Awaitable[list[EngineEndpoint]]]

_PATHS: Mapping[Method, str] = {
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "responses": "/v1/responses",
    "embeddings": "/v1/embeddings",
    "tokenize": "/tokenize",
    "detokenize": "/detokenize",
}


class EngineEndpointView:
    """The registry's engine endpoints, refreshed every `period_s`, grouped by app; and at
    once, at most once per `period_s` per app, when a request finds none for its app
    (`refresh_for`)."""

    def __init__(self, fetch: FetchEndpoints, *, period_s: float) -> None:
        self._by_app: dict[str, tuple[EngineEndpoint, ...]] = {}
        self._fetch = fetch
        self._period_s = period_s
        self._missed_at: dict[str, float] = {}
        self._pending: asyncio.Future[None] | None = None

        async def fetch_grouped() -> None:
            self.update(await fetch())

        self._refresh = PeriodicRefresh(
            fetch_grouped, None, period_s=period_s, what="engine endpoint"
        )

    def start(self) -> None:
        self._refresh.start()

    async def stop(self) -> None:
        await self._refresh.stop()

    def for_app(self, app_name: str) -> tuple[EngineEndpoint, ...]:
        return self._by_app.get(app_name, ())

    async def refresh_for(self, app_name: str) -> None:
        """Fetch the endpoints now for an app with none listed, unless that was done for it
        within `period_s`; concurrent callers share one fetch. A model that has just
        started (a swap, a wake) is registered before it is published ready, so its first
        requests find its engine here instead of going through a Serve handle new to this
        process, which learns its replicas only when Serve's shared long poll next returns
        (`ray/serve/_private/long_poll.py` `add_key_listeners`): seconds, or up to a minute
        when nothing else changes."""
        loop = asyncio.get_running_loop()
        if self._pending is None:
            now = loop.time()
            if now - self._missed_at.get(app_name, -math.inf) < self._period_s:
                return
            self._missed_at = {
                app: at for app, at in self._missed_at.items() if now - at < self._period_s
            }
            self._missed_at[app_name] = now
            self._pending = loop.create_task(self._fetch_now())
        with contextlib.suppress(Exception):
            await asyncio.shield(self._pending)

    async def _fetch_now(self) -> None:
        try:
            self.update(await self._fetch())
        except Exception as exc:
            log.warning("engine endpoint refresh failed: %r", exc)
        finally:
            self._pending = None

    def counts(self) -> Mapping[str, int]:
        return {app: len(found) for app, found in self._by_app.items()}

    def update(self, endpoints: list[EngineEndpoint]) -> None:
        by_app: dict[str, list[EngineEndpoint]] = {}
        for endpoint in endpoints:
            by_app.setdefault(endpoint.app_name, []).append(endpoint)
        self._by_app = {app: tuple(found) for app, found in by_app.items()}


class DirectHttpBackend:
    """`ModelBackend` over the engines' HTTP ports, with the Serve handle as fallback."""

    def __init__(
        self,
        endpoints: EngineEndpointView,
        fallback: ModelBackend,
        *,
        connect_timeout_s: float = 2.0,
        avoid_failed_s: float = 5.0,
    ) -> None:
        self._endpoints = endpoints
        self._fallback = fallback
        self._connect_timeout_s = connect_timeout_s
        self._avoid_failed_s = avoid_failed_s
        self._failed_at: dict[str, float] = {}
        self._load: Counter[str] = Counter()
        self._sent_direct = 0
        self._connections = EngineConnections(connect_timeout_s=connect_timeout_s)

    def stream(
        self,
        route: ModelRoute,
        method: Method,
        request: Any,
        body: Mapping[str, Any],
        *,
        request_id: str = "",
    ) -> AsyncIterator[Any]:
        candidates = self._candidates(route.app_name)
        if not candidates:
            return self._after_refresh(route, method, request, body, request_id)
        return self._direct(candidates, route, method, request, body, request_id)

    def _direct(
        self,
        candidates: list[EngineEndpoint],
        route: ModelRoute,
        method: Method,
        request: Any,
        body: Mapping[str, Any],
        request_id: str,
    ) -> AsyncIterator[Any]:
        # Same cache key, same replica (its prefix cache hits), within a load bound; else
        # the fewest requests in flight from this gateway: the engines' queues stay even.
        endpoint = choose_endpoint(candidates, self._load, affinity_key(body))
        return self._open(endpoint, route, method, request, body, request_id)

    async def _after_refresh(
        self,
        route: ModelRoute,
        method: Method,
        request: Any,
        body: Mapping[str, Any],
        request_id: str,
    ) -> AsyncIterator[Any]:
        """No endpoint known for the app: look again now (`EngineEndpointView.refresh_for`),
        then go direct, or through the handle."""
        await self._endpoints.refresh_for(route.app_name)
        candidates = self._candidates(route.app_name)
        inner = (
            self._direct(candidates, route, method, request, body, request_id)
            if candidates
            else self._fallback.stream(route, method, request, body, request_id=request_id)
        )
        try:
            async for item in inner:
                yield item
        finally:
            aclose = getattr(inner, "aclose", None)
            if aclose is not None:
                await aclose()

    def _candidates(self, app_name: str) -> list[EngineEndpoint]:
        now = time.monotonic()
        return [
            e
            for e in self._endpoints.for_app(app_name)
            if now - self._failed_at.get(e.url, -1e9) > self._avoid_failed_s
        ]

    def _open(
        self,
        endpoint: EngineEndpoint,
        route: ModelRoute,
        method: Method,
        request: Any,
        body: Mapping[str, Any],
        request_id: str,
    ) -> DirectStream:
        headers = {
            "Authorization": f"Bearer {endpoint.token}",
            "Content-Type": "application/json",
        }
        if request_id:
            headers["X-Request-Id"] = request_id
        payload = json.dumps(body).encode()
        self._load[endpoint.url] += 1
        return DirectStream(
            lambda: self._connections.request(endpoint.url, _PATHS[method], headers, payload),
            streaming=bool(body.get("stream")),
            fallback=lambda: self._fallback.stream(
                route, method, request, body, request_id=request_id
            ),
            use=_EndpointUse(self, endpoint),
        )

    def _mark_failed(self, url: str) -> None:
        now = time.monotonic()
        # Replaced replicas never come back under the same URL: forget old marks.
        for stale in [u for u, at in self._failed_at.items() if now - at > self._avoid_failed_s]:
            del self._failed_at[stale]
        self._failed_at[url] = now

    def _note_engine_error(self, endpoint: EngineEndpoint, error: EngineHttpError) -> None:
        """A dead or overloaded engine: send the next requests to the model's other
        replicas, or through the handle, until Serve has replaced it. An engine's own 500
        for one request says nothing about its health, so it is not avoided for it."""
        if engine_failure_is_transient(error.error.code, error.error.message):
            self._mark_failed(endpoint.url)
            log.warning(
                "engine %s answered %d (%s); avoiding it for %g s",
                endpoint.url,
                error.error.code,
                error.error.message[:200],
                self._avoid_failed_s,
            )

    def requests_by_path(self) -> Mapping[str, int]:
        return {**self._fallback.requests_by_path(), "direct": self._sent_direct}

    def endpoints_by_app(self) -> Mapping[str, int]:
        return self._endpoints.counts()

    async def close(self) -> None:
        await self._connections.close()


class _EndpointUse:
    """One request's use of one endpoint, reported to the backend (`direct_stream.py`)."""

    def __init__(self, backend: DirectHttpBackend, endpoint: EngineEndpoint) -> None:
        self._backend = backend
        self._endpoint = endpoint

    def sent(self) -> None:
        self._backend._sent_direct += 1

    def unreachable(self, error: EngineUnreachable) -> None:
        # Nothing reached the engine: its replica is gone or being replaced. The handle
        # path knows how to wait for, or refuse, a replaced replica.
        self._backend._mark_failed(self._endpoint.url)
        log.warning("engine %s unreachable (%s); using the handle", self._endpoint.url, error)

    def engine_error(self, error: EngineHttpError) -> None:
        self._backend._note_engine_error(self._endpoint, error)

    def done(self) -> None:
        load = self._backend._load
        url = self._endpoint.url
        load[url] -= 1
        if not load[url]:
            del load[url]  # endpoints come and go with their replicas
