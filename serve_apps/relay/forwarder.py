"""A resolved request sent to its model's engines, and their answer passed back.

The first output decides the status: an error before any byte went out is answered as an
error (503 + Retry-After for engine-side failures); after that a stream can only end with
an error event. Every forwarded request counts in `in_flight` until its answer is done.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

from fastapi.responses import JSONResponse, Response

from serve_apps.gateway.gateway_metrics import GatewayMetrics, RequestOutcome
from serve_apps.gateway.gateway_settings import GatewaySettings
from serve_apps.gateway.http_errors import model_server_error, unavailable, unsupported_endpoint
from serve_apps.gateway.openai_bodies import openai_body
from serve_apps.gateway.openai_errors import GatewayError
from serve_apps.gateway.request_timing import RequestTiming
from serve_apps.registry.routing_table import ModelRoute
from serve_apps.relay.client_response import RelayResponse
from serve_apps.relay.model_backend import HANDLE_METHODS, Method, ModelBackend
from serve_apps.relay.sse_encoding import as_json
from serve_apps.relay.streamed_answer import StreamRelay

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
        self.started: Counter[str] = Counter()
        """Requests forwarded per model since this replica started: when each was last
        used (the fleet parks on-demand models by it)."""

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
        self.started[route.name] += 1
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
            return RelayResponse(
                StreamRelay(
                    route,
                    first,
                    outputs,
                    timing=timing,
                    release=release,
                    metrics=self._metrics,
                    retry_after_s=self._settings.retry_after_s,
                    failure=self._backend_failure,
                )
            )
        except BaseException:
            release()
            raise

    def _backend_failure(self, route: ModelRoute, exc: BaseException) -> GatewayError:
        log.warning("model %s failed a request: %r", route.name, exc)
        return self._unavailable(
            f"The model '{route.name}' could not serve the request ({type(exc).__name__}); "
            "its engine is restarting or being replaced. Retry shortly."
        )

    def _unavailable(self, message: str) -> GatewayError:
        return unavailable(message, self._settings.retry_after_s)
