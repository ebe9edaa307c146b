"""The OpenAI-compatible endpoint: one ASGI app in front of every model.

The guard (`gateway/guard.py`) checks every request; the model endpoints' POSTs then go
straight to the handler (`model_routes.py`), everything else to a FastAPI app.

A plain class. It resolves the request's `model` (a name or an alias) through the live
routing table (`route_resolver.py`, which holds requests for aliases a swap is moving), and
forwards the rest to the model's engines through a `ModelBackend` (`relay/forwarder.py`).
Ray Serve wraps it in `gateway/serve_deployment.py`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any, Literal, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from serve_apps.gateway.gateway_metrics import (
    DiscardGatewayMetrics,
    GatewayMetrics,
    RequestOutcome,
    TenantAccounting,
    outcome_of_status,
)
from serve_apps.gateway.gateway_settings import GatewaySettings
from serve_apps.gateway.guard import GatewayGuard, Receive, Scope, request_id_of, tenant_of
from serve_apps.gateway.http_errors import (
    error_response,
    model_not_found,
    parser_message,
    routing_error,
    unavailable,
)
from serve_apps.gateway.in_flight_report import InFlightReporter, ReportInFlight
from serve_apps.gateway.json_body import parse_json_object
from serve_apps.gateway.model_list import model_entry, model_list
from serve_apps.gateway.model_routes import MODEL_PATHS, Answer, ClientGone, ModelRoutes, read_body
from serve_apps.gateway.openai_errors import GatewayError
from serve_apps.gateway.operator_access import OperatorAccess
from serve_apps.gateway.request_id import engine_request_id
from serve_apps.gateway.request_timing import RequestTiming
from serve_apps.registry.replica_health import ReplicaHealthView
from serve_apps.registry.route_resolver import RequestWake, RouteResolver, no_wakes
from serve_apps.registry.route_view import RouteView
from serve_apps.relay.client_response import keep_server_send
from serve_apps.relay.forwarder import RequestForwarder
from serve_apps.relay.model_backend import HANDLE_METHODS, Method, ModelBackend
from serve_apps.relay.stream_usage import request_usage
from serve_apps.tenants.tenant_gate import TenantGate
from serve_apps.tenants.tenant_sync import ExchangeUsage, FetchTenants, TenantSync

log = logging.getLogger(__name__)

STREAMING_METHODS: frozenset[Method] = frozenset({"chat", "completions", "responses"})


OperatorDocument = Literal["status", "fleet"]
"""The operator routes' documents: `GET /switchyard/v1/<which>`."""


class OperatorDocuments(Protocol):
    """What the operator routes serve, from the registry."""

    async def operator_document(self, which: OperatorDocument) -> dict[str, Any] | None:
        """`status`: the `status --json` document (registry/status_document.py); `fleet`:
        the live fleet as asked for; None until the manager has published its view."""
        ...


ParseRequest = Callable[[Method, dict[str, Any]], Any]
"""Turns a JSON body into the model server's request object; raises ValueError if invalid."""


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
        tenants: tuple[FetchTenants, ExchangeUsage] | None = None,
        request_wake: RequestWake | None = None,
        operator_documents: OperatorDocuments | None = None,
    ) -> None:
        self._settings = settings
        self._operator_documents = operator_documents
        self._gate = TenantGate(settings.initial_tenants())
        self._metrics: GatewayMetrics = TenantAccounting(
            metrics or DiscardGatewayMetrics(), self._gate.used_tokens
        )
        self._gate.on_reject = self._metrics.key_rejected
        self._routes = routes
        self._health = health
        self._backend = backend
        self._parse_request = parse_request
        self._tenant_sync = (
            None
            if tenants is None
            else TenantSync(self._gate, *tenants, period_s=settings.quota_sync_s)
        )
        self._resolver = RouteResolver(
            settings, routes, health, self._metrics, request_wake=request_wake or no_wakes
        )
        self._forwarder = RequestForwarder(settings, backend, self._metrics)
        self._reporter = InFlightReporter(
            self._forwarder.in_flight,
            self._forwarder.in_flight_by_app,
            self._resolver.held_by_alias,
            routes,
            self._metrics,
            report_in_flight,
            self._forwarder.started,
        )
        # The relay writes body chunks with the server's own send (relay/client_response.py); the
        # guard checks every request, the model endpoints skip FastAPI's layers.
        self.app = keep_server_send(
            GatewayGuard(
                ModelRoutes(self._handle, self._build_app()),
                gate=self._gate,
                max_body_bytes=self._settings.max_body_bytes,
                metrics=self._metrics,
                operator=OperatorAccess(settings.admin_key_sha256),
            )
        )

    @property
    def in_flight(self) -> Counter[str]:
        """Requests per model whose answer is not finished yet."""
        return self._forwarder.in_flight

    @property
    def tenants(self) -> TenantGate:
        return self._gate

    @property
    def held(self) -> int:
        """Requests waiting for a swap to finish, all aliases together."""
        return self._resolver.held

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        self._routes.start()
        self._health.start()
        self._reporter.start()
        if self._tenant_sync is not None:
            self._tenant_sync.start()

    async def stop(self) -> None:
        await self._routes.stop()
        await self._health.stop()
        await self._reporter.stop()
        if self._tenant_sync is not None:
            await self._tenant_sync.stop()

    # ---------------------------------------------------------------- app
    def _build_app(self) -> FastAPI:
        app = FastAPI(title="Switchyard", docs_url=None, redoc_url=None)

        @app.exception_handler(GatewayError)
        async def _gateway_error(_: Request, exc: GatewayError) -> Response:
            return error_response(exc)

        @app.exception_handler(StarletteHTTPException)
        async def _routing_error(request: Request, exc: StarletteHTTPException) -> Response:
            # Unknown paths (404) and wrong methods (405) in OpenAI's shape, not FastAPI's
            # `{"detail": ...}`: clients generated from OpenAI's spec parse only that.
            return error_response(routing_error(exc.status_code, request.method, request.url.path))

        @app.get("/health")
        async def health() -> dict[str, Any]:
            table = self._routes.table
            endpoints = self._backend.endpoints_by_app()
            return {
                "status": "ok",
                "routing_table_version": table.version,
                "models_ready": sum(1 for r in table.live_models() if r.state == "ready"),
                # How requests reached the engines: "direct" (the engine replica's own HTTP
                # port) or "handle" (Ray Serve handle, the fallback).
                "requests_by_path": dict(self._backend.requests_by_path()),
                # Engine endpoints the direct path knows, per model: a replica that has
                # started but is not listed here yet still gets requests through the handle.
                "direct_endpoints": {
                    r.name: endpoints.get(r.app_name, 0) for r in table.live_models()
                },
            }

        @app.get("/-/healthz")
        async def healthz() -> Response:
            # What Ray Serve's proxy answered here before the gateway listened itself;
            # load balancers configured for Serve keep working.
            return Response("success", media_type="text/plain")

        @app.get("/switchyard/v1/status")
        async def status() -> dict[str, Any]:
            # The guard let only the operator through (operator_access.py).
            return await self._operator_document("status")

        @app.get("/switchyard/v1/fleet")
        async def fleet() -> dict[str, Any]:
            return await self._operator_document("fleet")

        @app.get("/v1/models")
        async def models(request: Request) -> dict[str, Any]:
            return model_list(self._routes.table, tenant_of(request.scope).may_use)

        @app.get("/v1/models/{model_id:path}")
        async def model(request: Request, model_id: str) -> dict[str, Any]:
            entry = model_entry(self._routes.table, model_id, tenant_of(request.scope).may_use)
            if entry is None:
                raise model_not_found(model_id)
            return entry

        # The model endpoints' POSTs never get here (`ModelRoutes`); registered all the same,
        # so another method on their paths is answered 405, not 404.
        for path, method in MODEL_PATHS.items():

            async def endpoint(request: Request, method: Method = method) -> Any:
                return await self._handle(request.scope, request.receive, method)

            app.add_api_route(
                path, endpoint, methods=["POST"], response_model=None, include_in_schema=False
            )

        return app

    async def _operator_document(self, which: OperatorDocument) -> dict[str, Any]:
        """The registry's status or fleet document (`OperatorDocuments`)."""
        path = f"/switchyard/v1/{which}"
        if self._operator_documents is None:
            raise routing_error(404, "GET", path)
        try:
            document = await self._operator_documents.operator_document(which)
        except Exception as exc:
            raise unavailable(
                f"The fleet registry did not answer ({type(exc).__name__}); it restarts with "
                "the cluster's head.",
                self._settings.retry_after_s,
            ) from exc
        if document is None:
            raise unavailable(
                "The fleet manager has not published its view yet (it starts, or restarts).",
                self._settings.retry_after_s,
            )
        return document

    # ---------------------------------------------------------------- requests
    async def _handle(self, scope: Scope, receive: Receive, method: Method) -> Answer:
        timing = RequestTiming()
        timing.request_id, chosen = request_id_of(scope)
        timing.engine_request_id = engine_request_id(timing.request_id, chosen)
        try:
            return await self._handle_timed(scope, receive, method, timing)
        except GatewayError as error:
            # One line per refused request, by id: what a client quoting its id is told.
            log.info(
                "request %s (key %s, model %s) refused: %d %s",
                timing.request_id,
                timing.tenant or "-",
                timing.model,
                error.status,
                error.code or "",
            )
            self._metrics.request_finished(
                timing.record(outcome_of_status(error.status), error.status)
            )
            raise
        except (asyncio.CancelledError, ClientGone):
            self._metrics.request_finished(timing.record(RequestOutcome.CANCELLED, 499))
            raise

    async def _handle_timed(
        self, scope: Scope, receive: Receive, method: Method, timing: RequestTiming
    ) -> Answer:
        if not await self._routes.wait_loaded(30.0):
            raise unavailable(
                "The gateway has not loaded its routing table yet.", self._settings.retry_after_s
            )
        body = parse_json_object(await read_body(receive, self._settings.max_body_bytes))
        requested = body.get("model")
        if not isinstance(requested, str) or not requested:
            raise GatewayError(
                400,
                "The 'model' field is required and must be a string.",
                code="invalid_request",
                param="model",
            )
        tenant = tenant_of(scope)
        timing.tenant = tenant.name
        # Access and quota before any hold: a key that may not use the model, or has used
        # its quota, hears so at once rather than after a swap.
        self._gate.check_model(
            tenant, requested, self._routes.table.aliases.get(requested, requested)
        )
        self._gate.admit(tenant)
        route = await self._resolver.resolve(requested)
        timing.model = route.name
        timing.alias = requested if requested != route.name else ""
        body["model"] = route.name
        stream = bool(body.get("stream")) and method in STREAMING_METHODS
        if stream and method in HANDLE_METHODS:
            # Exact token counters need the engine's usage report at the end of the stream.
            timing.strip_usage = not request_usage(body)
        if method not in HANDLE_METHODS:
            # vLLM's own server validates these bodies; its 400s pass through.
            return await self._forwarder.forward(
                route, method, body, body, stream=stream, timing=timing
            )
        try:
            parsed = self._parse_request(method, body)
        except ValueError as exc:
            raise GatewayError(400, parser_message(exc), code="invalid_request") from None
        return await self._forwarder.forward(
            route, method, parsed, body, stream=stream, timing=timing
        )
