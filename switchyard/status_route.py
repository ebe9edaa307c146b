"""Reading the status document through the gateway's `GET /switchyard/v1/status` route.

Plain HTTP (the standard library only): no Ray driver joins the cluster, so `status --url`
works from any machine that reaches the endpoint, and a local `status` answers in well
under a second instead of the seconds a driver takes to connect.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass

from domain.status_report import StatusReport

STATUS_PATH = "/switchyard/v1/status"
ROUTE_TIMEOUT_S = 5.0
"""One read of the route; the registry answers from memory."""


class RouteUnavailable(Exception):
    """The route gave no document: nothing listens, the gateway predates the route (404),
    the registry did not answer (503), or the key was refused (401/403; `status` says
    which). `status` falls back to Ray where it can."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class StatusRoute:
    """Where and how to ask: the endpoint's base URL (with or without `/v1`), the operator
    key (None: send none) and a CA file for a self-signed HTTPS endpoint."""

    base_url: str
    operator_key: str | None = None
    ca_file: str | None = None
    timeout_s: float = ROUTE_TIMEOUT_S

    @property
    def url(self) -> str:
        base = self.base_url.rstrip("/")
        if base.endswith("/v1"):
            base = base[: -len("/v1")]
        return base + STATUS_PATH

    def fetch(self) -> StatusReport:
        request = urllib.request.Request(self.url, headers={"Accept": "application/json"})
        if self.operator_key:
            request.add_header("Authorization", f"Bearer {self.operator_key}")
        context = None
        if self.url.startswith("https://"):
            context = ssl.create_default_context(cafile=self.ca_file)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=context) as reply:
                body = reply.read()
        except urllib.error.HTTPError as exc:
            raise RouteUnavailable(
                f"{self.url} answered HTTP {exc.code}: {_error_message(exc)}", status=exc.code
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            raise RouteUnavailable(f"{self.url} did not answer ({reason})") from None
        try:
            return StatusReport.model_validate(json.loads(body))
        except ValueError as exc:
            raise RouteUnavailable(
                f"{self.url} answered with no status document ({str(exc).splitlines()[0]})"
            ) from None


def _error_message(exc: urllib.error.HTTPError) -> str:
    """The gateway's OpenAI-shaped error message, else the HTTP reason."""
    try:
        message = json.loads(exc.read())["error"]["message"]
    except (ValueError, KeyError, TypeError, OSError):
        return str(exc.reason)
    return str(message)
