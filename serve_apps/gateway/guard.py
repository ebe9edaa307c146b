"""Auth and body-size checks in front of the gateway, before any routing or parsing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from domain.tenant_keys import Tenant
from serve_apps.gateway.gateway_metrics import GatewayMetrics, RequestOutcome
from serve_apps.gateway.http_errors import body_too_large, error_response
from serve_apps.gateway.openai_errors import GatewayError
from serve_apps.gateway.operator_access import OPERATOR_PATHS, OperatorAccess
from serve_apps.gateway.request_id import HEADER, request_id_from
from serve_apps.gateway.request_timing import RequestTiming
from serve_apps.tenants.tenant_gate import Rejection, TenantGate

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Health probes answer without a key: load balancers and monitors send none.
_OPEN_PATHS = frozenset({"/health", "/-/healthz", "/-/routes"})
_TENANT = "switchyard.tenant"
_REQUEST_ID = "switchyard.request_id"


def tenant_of(scope: Scope) -> Tenant:
    """The tenant the guard authenticated for this request."""
    tenant: Tenant = scope["state"][_TENANT]
    return tenant


def request_id_of(scope: Scope) -> tuple[str, bool]:
    """(the request's id, whether the client chose it): `request_id.py`."""
    found: tuple[str, bool] = scope["state"][_REQUEST_ID]
    return found


class GatewayGuard:
    """Refuses a request without a valid API key (401) or with a declared body over the
    limit (413), and counts the refusal; an accepted request carries its tenant in the
    ASGI scope's state (`tenant_of`). The operator routes take the operator key instead
    (`operator_access.py`).

    Pure ASGI (not BaseHTTPMiddleware) so streamed responses pass through untouched.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        gate: TenantGate,
        max_body_bytes: int,
        metrics: GatewayMetrics,
        operator: OperatorAccess | None = None,
    ) -> None:
        self._app = app
        self._gate = gate
        self._operator = operator or OperatorAccess(None)
        self._max_body_bytes = max_body_bytes
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in _OPEN_PATHS:
            await self._app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        request_id, chosen = request_id_from(headers.get(HEADER))
        scope.setdefault("state", {})[_REQUEST_ID] = (request_id, chosen)
        send = _with_request_id(send, request_id.encode())
        if scope.get("path") in OPERATOR_PATHS:
            refused = self._operator.refusal(
                headers.get("authorization"), endpoint_open=not self._gate.enabled
            )
            if refused is None:
                await self._app(scope, receive, send)
                return
            response = error_response(refused)
            if refused.status == 401:
                response.headers["WWW-Authenticate"] = "Bearer"
            self._refused(refused.status)
            await response(scope, receive, send)
            return
        tenant = self._gate.authenticate(headers.get("authorization"))
        if tenant is None:
            error = GatewayError(
                401,
                "Missing or invalid API key (send 'Authorization: Bearer KEY').",
                code="invalid_api_key",
            )
            response = error_response(error)
            response.headers["WWW-Authenticate"] = "Bearer"
            self._refused(error.status)
            self._metrics.key_rejected("-", Rejection.INVALID_KEY.value)
            await response(scope, receive, send)
            return
        scope["state"][_TENANT] = tenant
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self._max_body_bytes:
            self._refused(413)
            await error_response(body_too_large(self._max_body_bytes))(scope, receive, send)
            return
        await self._app(scope, receive, send)

    def _refused(self, status: int) -> None:
        self._metrics.request_finished(RequestTiming().record(RequestOutcome.CLIENT_ERROR, status))


def _with_request_id(send: Send, request_id: bytes) -> Send:
    """`send` that puts `X-Request-Id` on the answer's headers, whatever answers."""

    async def sending(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), (HEADER.encode(), request_id)]
        await send(message)

    return sending
