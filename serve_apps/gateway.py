"""The OpenAI-compatible endpoint: one FastAPI app in front of every model.

A plain class. It resolves the request's `model` (a name or an alias) through the live
routing table, holds requests for aliases a swap is moving, and forwards the rest to the
model's engines through a `ModelBackend`. Ray Serve wraps it in `gateway_app.py`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from domain.model_state import ModelState
from serve_apps.api_keys import ApiKeyCheck
from serve_apps.gateway_metrics import (
    DiscardGatewayMetrics,
    GatewayMetrics,
    HoldOutcome,
    RequestOutcome,
    outcome_of_status,
)
from serve_apps.gateway_settings import GatewaySettings
from serve_apps.json_body import parse_json_object
from serve_apps.loop_task import LoopTask
from serve_apps.model_backend import Method, ModelBackend
from serve_apps.openai_errors import GatewayError
from serve_apps.replica_health import ReplicaHealthView
from serve_apps.request_timing import RequestTiming
from serve_apps.route_view import RouteView
from serve_apps.routing_table import Forward, Hold, ModelRoute, Refuse
from serve_apps.stream_usage import request_usage, scan_events

log = logging.getLogger(__name__)

ParseRequest = Callable[[Method, dict[str, Any]], Any]
"""Turns a JSON body into the model server's request object; raises ValueError if invalid."""

ReportInFlight = Callable[[str, int, dict[str, int]], Awaitable[None]]
"""(replica id, routing table version seen, in-flight requests per model): lets the manager
know when a draining model has finished its last request."""

_REPORT_PERIOD_S = 0.2

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_OPEN_PATHS = frozenset({"/health", "/-/healthz", "/-/routes"})


def _json_error(error: GatewayError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers())


class _GuardMiddleware:
    """Auth and body-size checks before any routing or parsing happens.

    Pure ASGI (not BaseHTTPMiddleware) so streamed responses pass through untouched.
    """

    def __init__(
        self, app: ASGIApp, *, keys: ApiKeyCheck, max_body_bytes: int, metrics: GatewayMetrics
    ) -> None:
        self._app = app
        self._keys = keys
        self._max_body_bytes = max_body_bytes
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in _OPEN_PATHS:
            await self._app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if not self._keys.allows(headers.get("authorization")):
            error = GatewayError(
                401,
                "Missing or invalid API key (send 'Authorization: Bearer KEY').",
                code="invalid_api_key",
            )
            response = _json_error(error)
            response.headers["WWW-Authenticate"] = "Bearer"
            self._refused(error.status)
            await response(scope, receive, send)
            return
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self._max_body_bytes:
            self._refused(413)
            await _json_error(self._too_large())(scope, receive, send)
            return
        await self._app(scope, receive, send)

    def _refused(self, status: int) -> None:
        self._metrics.request_finished(RequestTiming().record(RequestOutcome.CLIENT_ERROR, status))

    def _too_large(self) -> GatewayError:
        return GatewayError(
            413,
            f"Request body is larger than {self._max_body_bytes} bytes.",
            code="request_too_large",
        )


class Gateway:
    def __init__(
        self,
        settings: GatewaySettings,
        routes: RouteView,
        health: ReplicaHealthView,
        backend: ModelBackend,
        parse_request: ParseRequest,
        report_in_flight: ReportInFlight | None = None,
        metrics: GatewayMetrics | None = None,
    ) -> None:
        self._settings = settings
        self._metrics: GatewayMetrics = metrics or DiscardGatewayMetrics()
        self._held_by_alias: Counter[str] = Counter()
        self._report_in_flight = report_in_flight
        self._replica_id = uuid.uuid4().hex[:12]
        self._reporter = LoopTask(self._report_loop)
        self._routes = routes
        self._health = health
        self._backend = backend
        self._parse_request = parse_request
        self._keys = ApiKeyCheck(settings.api_keys)
        self._held = 0
        self.in_flight: Counter[str] = Counter()
        self.app = self._build_app()

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        self._routes.start()
        self._health.start()
        self._reporter.start()

    async def stop(self) -> None:
        await self._routes.stop()
        await self._health.stop()
        await self._reporter.stop()

    async def _report_loop(self) -> None:
        while True:
            try:
                counts = {name: n for name, n in self.in_flight.items() if n}
                # Also refreshes the gauges: Ray drops a gauge value that is not set again.
                self._metrics.in_flight(counts)
                self._metrics.held({a: n for a, n in self._held_by_alias.items() if n})
                if self._report_in_flight is not None:
                    await self._report_in_flight(
                        self._replica_id, self._routes.table.version, counts
                    )
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("in-flight report failed")
            await asyncio.sleep(_REPORT_PERIOD_S)

    # ---------------------------------------------------------------- app
    def _build_app(self) -> FastAPI:
        app = FastAPI(title="Switchyard", docs_url=None, redoc_url=None)
        app.add_middleware(
            _GuardMiddleware,
            keys=self._keys,
            max_body_bytes=self._settings.max_body_bytes,
            metrics=self._metrics,
        )

        @app.exception_handler(GatewayError)
        async def _gateway_error(_: Request, exc: GatewayError) -> Response:
            return _json_error(exc)

        @app.get("/health")
        async def health() -> dict[str, Any]:
            table = self._routes.table
            return {
                "status": "ok",
                "routing_table_version": table.version,
                "models_ready": sum(1 for r in table.live_models() if r.state == "ready"),
                # How requests reached the engines: "direct" (the engine replica's own HTTP
                # port) or "handle" (Ray Serve handle, the fallback).
                "requests_by_path": dict(self._backend.requests_by_path()),
            }

        @app.get("/-/healthz")
        async def healthz() -> Response:
            # What Ray Serve's proxy answered here before the gateway listened itself;
            # load balancers configured for Serve keep working.
            return Response("success", media_type="text/plain")

        @app.get("/v1/models")
        async def models() -> dict[str, Any]:
            return self._model_list()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Response:
            return await self._handle(request, "chat")

        @app.post("/v1/completions")
        async def completions(request: Request) -> Response:
            return await self._handle(request, "completions")

        return app

    def _model_list(self) -> dict[str, Any]:
        table = self._routes.table
        data: list[dict[str, Any]] = []
        for route in table.live_models():
            data.append(
                {
                    "id": route.name,
                    "object": "model",
                    "created": 0,
                    "owned_by": "switchyard",
                    "state": route.state.value,
                    "aliases": list(table.aliases_of(route.name)),
                    "layout": route.layout,
                }
            )
        for alias, target in sorted(table.aliases.items()):
            data.append(
                {
                    "id": alias,
                    "object": "model",
                    "created": 0,
                    "owned_by": "switchyard",
                    "alias_for": target,
                }
            )
        return {"object": "list", "data": data}

    # ---------------------------------------------------------------- requests
    async def _read_body(self, request: Request) -> dict[str, Any]:
        # Read with a cap: a chunked upload has no Content-Length for the middleware to check.
        limit = self._settings.max_body_bytes
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise GatewayError(
                    413, f"Request body is larger than {limit} bytes.", code="request_too_large"
                )
            chunks.append(chunk)
        return parse_json_object(b"".join(chunks))

    async def _resolve(self, requested: str) -> ModelRoute:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._settings.hold_timeout_s
        held = False
        hold_outcome = HoldOutcome.RELEASED
        held_since = loop.time()
        try:
            while True:
                resolution = self._routes.table.resolve(requested)
                if isinstance(resolution, Forward):
                    # Only health seen after the last table change counts: a model that was
                    # just (re)deployed and published READY has no stale "0 replicas" against it.
                    fresh = self._health.updated_at > self._routes.changed_at
                    if fresh and self._health.running(resolution.route.app_name) == 0:
                        raise self._unavailable(
                            f"The model '{resolution.route.name}' has no running replica "
                            "right now (it is being replaced); retry shortly."
                        )
                    return resolution.route
                if isinstance(resolution, Refuse):
                    refused = resolution.route
                    if refused is not None and self._serving_again(refused):
                        return refused
                    retry = self._settings.retry_after_s if resolution.status == 503 else None
                    raise GatewayError(
                        resolution.status,
                        resolution.message,
                        code=resolution.code,
                        param="model",
                        retry_after_s=retry,
                    )
                assert isinstance(resolution, Hold)
                if not held:
                    if self._held >= self._settings.max_held_requests:
                        self._metrics.hold_finished(requested, HoldOutcome.QUEUE_FULL, 0.0)
                        raise self._unavailable(
                            f"'{requested}' is being switched and the hold queue is full."
                        )
                    self._held += 1
                    self._held_by_alias[requested] += 1
                    held = True
                    held_since = loop.time()
                remaining = deadline - loop.time()
                if remaining <= 0 or not await self._routes.wait_for_change(remaining):
                    hold_outcome = HoldOutcome.TIMEOUT
                    raise self._unavailable(
                        f"'{requested}' is still being switched after "
                        f"{self._settings.hold_timeout_s:g} s."
                    )
        finally:
            if held:
                self._held -= 1
                self._held_by_alias[requested] -= 1
                self._metrics.hold_finished(requested, hold_outcome, loop.time() - held_since)

    def _serving_again(self, route: ModelRoute) -> bool:
        """A DEGRADED model that this gateway sees running a replica again is served.

        The manager marks DEGRADED from its own poll of Serve every few seconds, so its mark
        can lag a replica Serve has already replaced; replica health this gateway observed
        after that mark overrides it (a lost node still shows 0 replicas, and is refused)."""
        if route.state is not ModelState.DEGRADED:
            return False
        fresh = self._health.updated_at > self._routes.changed_at
        return fresh and (self._health.running(route.app_name) or 0) > 0

    def _unavailable(self, message: str) -> GatewayError:
        return GatewayError(
            503, message, code="model_unavailable", retry_after_s=self._settings.retry_after_s
        )

    async def _handle(self, request: Request, method: Method) -> Response:
        timing = RequestTiming()
        try:
            return await self._handle_timed(request, method, timing)
        except GatewayError as error:
            self._metrics.request_finished(
                timing.record(outcome_of_status(error.status), error.status)
            )
            raise
        except asyncio.CancelledError:
            self._metrics.request_finished(timing.record(RequestOutcome.CANCELLED, 499))
            raise

    async def _handle_timed(
        self, request: Request, method: Method, timing: RequestTiming
    ) -> Response:
        if not await self._routes.wait_loaded(30.0):
            raise self._unavailable("The gateway has not loaded its routing table yet.")
        body = await self._read_body(request)
        requested = body.get("model")
        if not isinstance(requested, str) or not requested:
            raise GatewayError(
                400,
                "The 'model' field is required and must be a string.",
                code="invalid_request",
                param="model",
            )
        route = await self._resolve(requested)
        timing.model = route.name
        timing.alias = requested if requested != route.name else ""
        body["model"] = route.name
        stream = bool(body.get("stream"))
        if stream:
            # Exact token counters need the engine's usage report at the end of the stream.
            timing.strip_usage = not request_usage(body)
        try:
            parsed = self._parse_request(method, body)
        except ValueError as exc:
            raise GatewayError(400, _first_line(exc), code="invalid_request") from None
        return await self._forward(route, method, parsed, body, stream=stream, timing=timing)

    async def _forward(
        self,
        route: ModelRoute,
        method: Method,
        parsed: Any,
        body: dict[str, Any],
        *,
        stream: bool,
        timing: RequestTiming | None = None,
    ) -> Response:
        timing = timing or RequestTiming(model=route.name)
        self.in_flight[route.name] += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.in_flight[route.name] -= 1

        try:
            try:
                outputs = aiter(self._backend.stream(route, method, parsed, body))
                first = await asyncio.wait_for(anext(outputs), self._settings.first_chunk_timeout_s)
            except TimeoutError:
                raise self._unavailable(
                    f"The model '{route.name}' sent nothing for "
                    f"{self._settings.first_chunk_timeout_s:g} s."
                ) from None
            except StopAsyncIteration:
                raise GatewayError(502, f"The model '{route.name}' returned nothing.") from None
            except GatewayError:
                raise
            except Exception as exc:
                raise self._backend_failure(route, exc) from None
            error = _error_of(first, self._settings.retry_after_s)
            if error is not None:
                raise error
            if not stream:
                release()
                payload = _as_json(first)
                if isinstance(payload, dict):
                    timing.usage.take(payload.get("usage"))
                self._metrics.request_finished(timing.record(RequestOutcome.OK, 200))
                return JSONResponse(payload)
            return StreamingResponse(
                self._sse(route, first, outputs, release, timing),
                media_type="text/event-stream",
            )
        except BaseException:
            release()
            raise

    async def _sse(
        self,
        route: ModelRoute,
        first: Any,
        outputs: AsyncIterator[Any],
        release: Callable[[], None],
        timing: RequestTiming,
    ) -> AsyncIterator[str]:
        started = time.monotonic()
        outcome = RequestOutcome.CANCELLED
        try:
            # The first chunk is the first token's (vLLM sends nothing before prefill ends).
            timing.chunk()
            yield scan_events(_sse_text(first), timing.usage, strip_usage=timing.strip_usage)
            async for item in outputs:
                error = _error_of(item, self._settings.retry_after_s)
                if error is not None:
                    outcome = RequestOutcome.STREAM_ERROR
                    yield _sse_error(error)
                    return
                text = scan_events(_sse_text(item), timing.usage, strip_usage=timing.strip_usage)
                if _has_content(text):
                    timing.chunk()
                if text:
                    yield text
            outcome = RequestOutcome.OK
        except Exception as exc:
            # Headers are sent; the only honest signal left is an error event in the stream.
            log.warning(
                "stream from %s broke after %.1f s: %s",
                route.name,
                time.monotonic() - started,
                exc,
            )
            outcome = RequestOutcome.STREAM_ERROR
            yield _sse_error(self._backend_failure(route, exc))
        finally:
            release()
            # The status line (200) went out with the first chunk, whatever happened after.
            self._metrics.request_finished(timing.record(outcome, 200))

    def _backend_failure(self, route: ModelRoute, exc: BaseException) -> GatewayError:
        log.warning("model %s failed a request: %r", route.name, exc)
        return self._unavailable(
            f"The model '{route.name}' could not serve the request ({type(exc).__name__}); "
            "its engine is restarting or being replaced. Retry shortly."
        )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    lines = text.splitlines()
    # pydantic puts the field on line 2 and the problem on line 3; keep them together.
    return " ".join(line.strip() for line in lines[:3])


def _error_of(item: Any, retry_after_s: int) -> GatewayError | None:
    """An OpenAI error object from the model server (vLLM's ErrorResponse), if `item` is one."""
    error = getattr(item, "error", None)
    if error is None or not hasattr(error, "message"):
        return None
    status = getattr(error, "code", 500)
    status = status if isinstance(status, int) and 400 <= status < 600 else 500
    retry = None
    if status >= 500:
        # Engine-side failures (dead engine, overload) are transient for the client.
        status, retry = 503, retry_after_s
    return GatewayError(
        status,
        str(error.message),
        code=getattr(error, "type", None),
        param=getattr(error, "param", None),
        retry_after_s=retry,
    )


def _as_json(item: Any) -> Any:
    if hasattr(item, "model_dump"):
        return item.model_dump(mode="json")
    return item


def _sse_text(item: Any) -> str:
    if isinstance(item, list):
        return "".join(_sse_text(part) for part in item)
    if isinstance(item, str):
        return item
    return f"data: {json.dumps(_as_json(item))}\n\n"


def _has_content(text: str) -> bool:
    """A chunk that carries tokens (not only `[DONE]` or a usage report)."""
    return '"choices":[{' in text or '"choices": [{' in text


def _sse_error(error: GatewayError) -> str:
    return f"data: {json.dumps(error.body())}\n\ndata: [DONE]\n\n"
