"""Reading a stack through the gateway's operator routes: `GET /switchyard/v1/status` (the
`status --json` document) and `GET /switchyard/v1/fleet` (the live fleet as asked for).

Plain HTTP (the standard library only): no Ray driver joins the cluster, so `status --url`
works from any machine that reaches the endpoint, and a local `status`, `export` or
unchanged `diff -f` answers in well under a second instead of the seconds a driver takes
to connect. `local_routes` finds the recorded stack's routes and its operator key.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domain.fleet_file import FleetModelEntry
from domain.residency import Residency
from domain.status_report import StatusReport

STATUS_PATH = "/switchyard/v1/status"
FLEET_PATH = "/switchyard/v1/fleet"
DEFAULT_ADMIN_KEY_ENV = "SWITCHYARD_ADMIN_KEY"
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
class LiveFleet:
    """The live fleet as the manager last published it: each model's entry as asked for
    (name -> entry) and the aliases (alias -> name), what `diff` compares a file with."""

    models: dict[str, FleetModelEntry]
    aliases: dict[str, str]

    @property
    def on_demand(self) -> bool:
        return any(e.residency is Residency.ON_DEMAND for e in self.models.values())


@dataclass(frozen=True)
class OperatorRoutes:
    """Where and how to ask: the endpoint's base URL (with or without `/v1`), the operator
    key (None: send none) and a CA file for a self-signed HTTPS endpoint."""

    base_url: str
    operator_key: str | None = None
    ca_file: str | None = None
    timeout_s: float = ROUTE_TIMEOUT_S

    def url(self, path: str) -> str:
        base = self.base_url.rstrip("/")
        if base.endswith("/v1"):
            base = base[: -len("/v1")]
        return base + path

    def status(self) -> StatusReport:
        url, body = self._get(STATUS_PATH)
        try:
            return StatusReport.model_validate(body)
        except ValueError as exc:
            raise RouteUnavailable(
                f"{url} answered with no status document ({str(exc).splitlines()[0]})"
            ) from None

    def fleet(self) -> LiveFleet:
        url, body = self._get(FLEET_PATH)
        try:
            models = [FleetModelEntry.model_validate(m) for m in body["models"]]
            return LiveFleet({m.name: m for m in models}, dict(body["aliases"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise RouteUnavailable(
                f"{url} answered with no fleet ({str(exc).splitlines()[0]})"
            ) from None

    def _get(self, path: str) -> tuple[str, Any]:
        url = self.url(path)
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        if self.operator_key:
            request.add_header("Authorization", f"Bearer {self.operator_key}")
        context = None
        if url.startswith("https://"):
            context = ssl.create_default_context(cafile=self.ca_file)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=context) as reply:
                raw = reply.read()
        except urllib.error.HTTPError as exc:
            raise RouteUnavailable(
                f"{url} answered HTTP {exc.code}: {_error_message(exc)}", status=exc.code
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            raise RouteUnavailable(f"{url} did not answer ({reason})") from None
        try:
            return url, json.loads(raw)
        except ValueError:
            raise RouteUnavailable(f"{url} answered with no JSON") from None


def operator_key(admin_key_env: str | None, recorded_env: str | None = None) -> str | None:
    """The operator key from `admin_key_env`, else the variable `up` recorded, else
    SWITCHYARD_ADMIN_KEY; None when that is unset (the route is tried without a key)."""
    name = admin_key_env or recorded_env or DEFAULT_ADMIN_KEY_ENV
    return os.environ.get(name, "").strip() or None


def local_routes(
    address: str | None,
    state_dir: Path | None,
    *,
    admin_key_env: str | None = None,
    ca_file: str | None = None,
) -> OperatorRoutes | None:
    """The routes of the stack `up` recorded in `state_dir`, when a command reads that
    stack (no other `--address` or $RAY_ADDRESS); None otherwise."""
    from switchyard.stack import read_stack_info
    from switchyard.stack_config import default_state_dir

    info = read_stack_info(state_dir or default_state_dir())
    if info is None:
        return None
    wanted = address or os.environ.get("RAY_ADDRESS") or info.address
    if wanted != info.address:
        return None
    return OperatorRoutes(
        info.endpoint, operator_key(admin_key_env, info.admin_key_env), ca_file or info.tls_cert
    )


def _error_message(exc: urllib.error.HTTPError) -> str:
    """The gateway's OpenAI-shaped error message, else the HTTP reason."""
    try:
        message = json.loads(exc.read())["error"]["message"]
    except (ValueError, KeyError, TypeError, OSError):
        return str(exc.reason)
    return str(message)


def local_live_fleet(address: str | None, state_dir: Path | None) -> LiveFleet | None:
    """The recorded stack's live fleet through its gateway; None when the command reads
    another stack or the route gives none (the caller asks the manager over Ray)."""
    routes = local_routes(address, state_dir)
    if routes is None:
        return None
    try:
        return routes.fleet()
    except RouteUnavailable:
        return None
