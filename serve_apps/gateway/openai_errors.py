"""Errors in OpenAI's JSON shape, so the official clients raise the right exception class."""

from __future__ import annotations

from typing import Any

# OpenAI's `type` strings by status; clients key their exception classes on the status.
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "service_unavailable",
}


class GatewayError(Exception):
    """An error the gateway answers with; carries status, code and the Retry-After hint."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        retry_after_s: int | None = None,
        error_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.error_type = error_type
        """Overrides the `type` the status implies (OpenAI's 429s say `requests`/`tokens`)."""
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.retry_after_s = retry_after_s

    def body(self) -> dict[str, Any]:
        body = error_body(self.status, self.message, code=self.code, param=self.param)
        if self.error_type is not None:
            body["error"]["type"] = self.error_type
        return body

    def headers(self) -> dict[str, str]:
        if self.retry_after_s is not None:
            return {"Retry-After": str(self.retry_after_s)}
        if self.status >= 500:
            # A failure the gateway does not know to be transient (an engine's own 500):
            # OpenAI's clients retry every 5xx unless told not to, and would only repeat it.
            return {"x-should-retry": "false"}
        return {}


def error_body(
    status: int, message: str, *, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    error_type = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}
