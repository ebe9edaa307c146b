"""The gateway's fast data path: stream from an engine replica's own HTTP port.

The replica serves vLLM's OpenAI app next to its Serve handle (`direct_engine_server.py`)
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

import json
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from serve_apps.engine_endpoint import EngineEndpoint
from serve_apps.model_backend import Method, ModelBackend
from serve_apps.periodic_refresh import PeriodicRefresh
from serve_apps.replica_affinity import affinity_key, choose_endpoint
from serve_apps.routing_table import ModelRoute

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
    """The registry's engine endpoints, refreshed every `period_s`, grouped by app."""

    def __init__(self, fetch: FetchEndpoints, *, period_s: float) -> None:
        self._by_app: dict[str, tuple[EngineEndpoint, ...]] = {}

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

    def update(self, endpoints: list[EngineEndpoint]) -> None:
        by_app: dict[str, list[EngineEndpoint]] = {}
        for endpoint in endpoints:
            by_app.setdefault(endpoint.app_name, []).append(endpoint)
        self._by_app = {app: tuple(found) for app, found in by_app.items()}


@dataclass(frozen=True)
class _ErrorDetail:
    message: str
    type: str | None
    param: str | None
    code: int


@dataclass(frozen=True)
class EngineHttpError:
    """A non-200 answer of the engine's app, shaped like vLLM's ErrorResponse (`.error`)."""

    error: _ErrorDetail


def engine_http_error(status: int | None, payload: bytes) -> EngineHttpError:
    """vLLM answers `{"error": {...}}` (or, in older versions, the fields at the top level).

    `status` None: an error event inside a 200 stream, whose only status is the body's own
    `code` (500 when that is missing or not an HTTP error status)."""
    try:
        body = json.loads(payload)
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    nested = body.get("error")
    detail: dict[str, Any] = nested if isinstance(nested, dict) else body
    if status is None:
        code = detail.get("code")
        status = code if isinstance(code, int) and 400 <= code < 600 else 500
    message = detail.get("message") or payload.decode("utf-8", "replace")[:500] or str(status)
    kind, param = detail.get("type"), detail.get("param")
    return EngineHttpError(
        _ErrorDetail(
            message=str(message),
            type=kind if isinstance(kind, str) else None,
            param=param if isinstance(param, str) else None,
            code=status,
        )
    )


_ERROR_EVENT = b'data: {"error"'


def split_at_error_event(events: bytes) -> tuple[bytes, EngineHttpError | None]:
    """(the events before vLLM's in-stream error event, that error), or (events, None).

    vLLM answers 200 before generating, so an engine that dies (or a request it refuses once
    it has started) shows up as `data: {"error": {...}}` inside the stream. Turning it into an
    error item lets the gateway answer 503 + Retry-After when it comes first, before any byte
    went to the client, and count a stream error when it comes later.
    """
    if _ERROR_EVENT not in events:  # the fast path: a token's text cannot hold it unescaped
        return events, None
    start = 0
    while start < len(events):
        end = events.find(b"\n\n", start)
        end = len(events) if end < 0 else end + 2
        event = events[start:end]
        if event.startswith(_ERROR_EVENT):
            return events[:start], engine_http_error(None, event[len(b"data: ") :].strip())
        start = end
    return events, None


def complete_events(buffer: bytes) -> tuple[bytes, bytes]:
    """(whole SSE events, the incomplete rest): the gateway scans whole events only."""
    if buffer.endswith(b"\n\n"):  # the usual case: one read, whole events; no copy
        return buffer, b""
    end = buffer.rfind(b"\n\n")
    if end < 0:
        return b"", buffer
    return buffer[: end + 2], buffer[end + 2 :]


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
        self._session: Any = None

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
            return self._fallback.stream(route, method, request, body, request_id=request_id)
        # Same cache key, same replica (its prefix cache hits), within a load bound; else
        # the fewest requests in flight from this gateway: the engines' queues stay even.
        endpoint = choose_endpoint(candidates, self._load, affinity_key(body))
        return self._stream_http(endpoint, route, method, request, body, request_id)

    def _candidates(self, app_name: str) -> list[EngineEndpoint]:
        now = time.monotonic()
        return [
            e
            for e in self._endpoints.for_app(app_name)
            if now - self._failed_at.get(e.url, -1e9) > self._avoid_failed_s
        ]

    def _client(self) -> Any:
        if self._session is None:
            import aiohttp

            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=0,
                    # Below the engine side's keep-alive (300 s), so a pooled connection is
                    # never one the server already closed.
                    keepalive_timeout=60,
                ),
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=self._connect_timeout_s, sock_read=None
                ),
                auto_decompress=False,
            )
        return self._session

    async def _stream_http(
        self,
        endpoint: EngineEndpoint,
        route: ModelRoute,
        method: Method,
        request: Any,
        body: Mapping[str, Any],
        request_id: str = "",
    ) -> AsyncIterator[Any]:
        import aiohttp

        self._load[endpoint.url] += 1
        try:
            try:
                response = await self._client().post(
                    endpoint.url + _PATHS[method],
                    data=json.dumps(body),
                    headers={
                        "Authorization": f"Bearer {endpoint.token}",
                        "Content-Type": "application/json",
                        **({"X-Request-Id": request_id} if request_id else {}),
                    },
                )
            except (aiohttp.ClientConnectionError, TimeoutError) as exc:
                # Nothing reached the engine: its replica is gone or being replaced. The
                # handle path knows how to wait for, or refuse, a replaced replica.
                self._mark_failed(endpoint.url)
                log.warning("engine %s unreachable (%r); using the handle", endpoint.url, exc)
                async for item in self._fallback.stream(
                    route, method, request, body, request_id=request_id
                ):
                    yield item
                return
            self._sent_direct += 1
            async with response:
                if response.status != 200:
                    refused = engine_http_error(response.status, await response.read())
                    self._note_engine_error(endpoint, refused)
                    yield refused
                    return
                if not body.get("stream"):
                    yield json.loads(await response.read())
                    return
                # Bytes as they came (whole events), never decoded: the relay's cost is
                # per chunk, and most chunks need nothing but a scan (relay_response.py).
                pending = b""
                async for data in response.content.iter_any():
                    events, pending = complete_events(pending + data if pending else data)
                    if _ERROR_EVENT in events:
                        events, error = split_at_error_event(events)
                        if events:
                            yield events
                        if error is not None:
                            self._note_engine_error(endpoint, error)
                            yield error
                            return
                    elif events:
                        yield events
                if pending.strip():
                    yield pending
        finally:
            self._load[endpoint.url] -= 1
            if not self._load[endpoint.url]:
                del self._load[endpoint.url]  # endpoints come and go with their replicas

    def _mark_failed(self, url: str) -> None:
        now = time.monotonic()
        # Replaced replicas never come back under the same URL: forget old marks.
        for stale in [u for u, at in self._failed_at.items() if now - at > self._avoid_failed_s]:
            del self._failed_at[stale]
        self._failed_at[url] = now

    def _note_engine_error(self, endpoint: EngineEndpoint, error: EngineHttpError) -> None:
        """A server-side failure (a dead or overloaded engine): send the next requests to
        the model's other replicas, or through the handle, until Serve has replaced it."""
        if error.error.code >= 500:
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

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
