"""Who may read the operator routes (`GET /switchyard/v1/status` and `/switchyard/v1/fleet`):
the operator key only.

The status document shows every node's hardware and every tenant's usage, so a tenant key
never opens it. With an operator key (`up --admin-key-env NAME`; the gateway holds its
SHA-256) the bearer token must be that key. Without one the routes are open only while the
whole endpoint is (no tenant keys: `up` allows that on loopback only); an endpoint with
tenant keys and no operator key refuses them with 403 and says how to set one.
"""

from __future__ import annotations

import hashlib
import hmac

from serve_apps.gateway.openai_errors import GatewayError

OPERATOR_PATHS = frozenset({"/switchyard/v1/status", "/switchyard/v1/fleet"})
"""Paths only the operator may read."""


class OperatorAccess:
    def __init__(self, key_sha256: str | None) -> None:
        self._digest = None if key_sha256 is None else bytes.fromhex(key_sha256)

    def refusal(self, authorization: str | None, *, endpoint_open: bool) -> GatewayError | None:
        """None when `authorization` may read an operator route; else the error to answer.
        `endpoint_open`: the endpoint has no tenant keys now."""
        if self._digest is None:
            if endpoint_open:
                return None
            return GatewayError(
                403,
                "This endpoint has tenant keys and no operator key, and a tenant key does "
                "not open the operator routes: start it with `switchyard up --admin-key-env "
                "NAME` (NAME: an environment variable holding the operator key).",
                code="operator_key_not_configured",
            )
        offered = b""
        if authorization and authorization.startswith("Bearer "):
            token = authorization[len("Bearer ") :].strip()
            offered = hashlib.sha256(token.encode()).digest()
        if offered and hmac.compare_digest(offered, self._digest):
            return None
        return GatewayError(
            401,
            "Missing or invalid operator key (send 'Authorization: Bearer KEY' with the key "
            "of `up --admin-key-env`).",
            code="invalid_operator_key",
        )
