"""A resolved request sent to its model's engines, and their answer passed back.

The first output decides the status: an error before any byte went out is answered as an
error (503 + Retry-After for engine-side failures); after that a stream can only end with
an error event. Every forwarded request counts in `in_flight` until its answer is done.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi.responses import JSONResponse, Response

from serve_apps.gateway_errors import model_server_error, unavailable, unsupported_endpoint
from serve_apps.gateway_metrics import GatewayMetrics, RequestOutcome
from serve_apps.gateway_settings import GatewaySettings
from serve_apps.model_backend import HANDLE_METHODS, Method, ModelBackend
from serve_apps.openai_bodies import openai_body
from serve_apps.openai_errors import GatewayError
from serve_apps.relay_response import RelayResponse
from serve_apps.request_timing import RequestTiming
from serve_apps.routing_table import ModelRoute
from serve_apps.sse_encoding import as_json, has_content, sse_error, sse_text
from serve_apps.stream_usage import scan_chunk

log = logging.getLogger(__name__)


class RequestForwarder:
    def __init__(
        self, settings: GatewaySettings, backend: ModelBackend, metrics: GatewayMetrics
    ) -> None:
        self._settings = settings
        self._backend = backend
        self._metrics = metrics
        self.in_flight: Counter[str] = Counter()
        """Requests per model whose answer is not finished yet."""
        self.in_flight_by_app: Counter[str] = Counter()
        """The same per Serve app: what a drain waits on, since a same-name swap runs two
        apps of one model name."""

    async def forward(
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
        self.in_flight_by_app[route.app_name] += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.in_flight[route.name] -= 1
                self.in_flight_by_app[route.app_name] -= 1

        try:
            try:
                outputs = aiter(
                    self._backend.stream(
                        route, method, parsed, body, request_id=timing.engine_request_id
                    )
                )
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
            error = model_server_error(first, self._settings.retry_after_s)
            if error is not None:
                if error.status == 404 and method not in HANDLE_METHODS:
                    # The model exists (the route resolved), so the engine lacks the path.
                    raise unsupported_endpoint(route.name, method)
                raise error
            if not stream:
                release()
                payload = openai_body(as_json(first))
                if isinstance(payload, dict):
                    timing.usage.take(payload.get("usage"))
                self._metrics.request_finished(timing.record(RequestOutcome.OK, 200))
                return JSONResponse(payload)
            return RelayResponse(self._sse(route, first, outputs, release, timing))
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
    ) -> AsyncIterator[bytes]:
        started = time.monotonic()
        outcome = RequestOutcome.CANCELLED
        usage, strip = timing.usage, timing.strip_usage
        try:
            # The first chunk is the first token's (vLLM sends nothing before prefill ends).
            timing.chunk()
            yield scan_chunk(_sse_bytes(first), usage, strip_usage=strip)
            async for item in outputs:
                # The direct path's items are the engine's bytes (the per-token case: kept
                # to two substring scans); the handle path's are objects or text.
                if type(item) is not bytes:
                    error = model_server_error(item, self._settings.retry_after_s)
                    if error is not None:
                        outcome = RequestOutcome.STREAM_ERROR
                        yield sse_error(error).encode()
                        return
                    item = _sse_bytes(item)
                chunk = scan_chunk(item, usage, strip_usage=strip)
                if has_content(chunk):
                    timing.chunk()
                if chunk:
                    yield chunk
            outcome = RequestOutcome.OK
        except Exception as exc:
            # Headers are sent; the only honest signal left is an error event in the stream.
            log.warning(
                "request %s: stream from %s broke after %.1f s: %s",
                timing.request_id,
                route.name,
                time.monotonic() - started,
                exc,
            )
            outcome = RequestOutcome.STREAM_ERROR
            yield sse_error(self._backend_failure(route, exc)).encode()
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

    def _unavailable(self, message: str) -> GatewayError:
        return unavailable(message, self._settings.retry_after_s)


def _sse_bytes(item: Any) -> bytes:
    return item if type(item) is bytes else sse_text(item).encode("utf-8")
