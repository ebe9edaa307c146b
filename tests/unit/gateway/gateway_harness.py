"""A gateway driven over ASGI with fake routes, replica health and model backend, for the
gateway's unit specs (test_gateway.py, test_gateway_holds.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import httpx

from domain.model_state import ModelState
from serve_apps.gateway.app import Gateway, OperatorDocument
from serve_apps.gateway.gateway_settings import GatewaySettings
from serve_apps.registry.replica_health import ReplicaHealthView
from serve_apps.registry.route_view import RouteView
from serve_apps.registry.routing_table import ModelRoute, RoutingTable
from serve_apps.relay.model_backend import Method
from tests.support.waiting import wait_until_async

RETRY_AFTER = "7"

# ---------------------------------------------------------------- fakes


class FakeRegistry:
    """The registry's long poll: answers at once when the caller's version is stale."""

    def __init__(self, table: RoutingTable) -> None:
        self.table = table
        self._changed = asyncio.Event()
        self.wakes_asked: list[str] = []
        """Parked models the gateway asked to wake, in order."""
        self.status_reads = 0

    async def operator_document(self, which: OperatorDocument) -> dict[str, Any] | None:
        """What the registry's status and fleet documents answer, reduced to what a test
        reads."""
        self.status_reads += 1
        if which == "fleet":
            return {"models": [], "aliases": dict(self.table.aliases)}
        return {"read_via": "gateway", "routing_table_version": self.table.version}

    async def request_wake(self, name: str) -> None:
        self.wakes_asked.append(name)

    def publish(self, table: RoutingTable) -> None:
        self.table = table
        self._changed.set()
        self._changed = asyncio.Event()

    async def fetch(self, known: RoutingTable, timeout_s: float) -> RoutingTable:
        if not self.table.supersedes(known):
            with suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout_s)
        return self.table


@dataclass
class FakeHealth:
    running: dict[str, int] = field(default_factory=dict)

    async def fetch(self) -> Mapping[str, int]:
        return dict(self.running)


@dataclass
class FakeResponse:
    """A non-streaming model server answer (pydantic-like)."""

    payload: dict[str, Any]

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        assert mode == "json"
        return self.payload


def error_response(message: str, code: Any, kind: str = "BadRequestError") -> SimpleNamespace:
    """vLLM's ErrorResponse shape: `.error` with message, type and code (the HTTP status)."""
    return SimpleNamespace(error=SimpleNamespace(message=message, type=kind, code=code, param=None))


Script = Callable[[ModelRoute, Method, Any], AsyncIterator[Any]]


def yields(*items: Any, then: BaseException | None = None) -> Script:
    async def script(route: ModelRoute, method: Method, request: Any) -> AsyncIterator[Any]:
        for item in items:
            yield item
        if then is not None:
            raise then

    return script


def completion(route: ModelRoute, method: Method, request: Any) -> AsyncIterator[Any]:
    return yields(FakeResponse({"object": "chat.completion", "model": route.name}))(
        route, method, request
    )


@dataclass
class FakeBackend:
    script: Script = completion
    calls: list[tuple[ModelRoute, Method, Any]] = field(default_factory=list)
    request_ids: list[str] = field(default_factory=list)

    def stream(
        self,
        route: ModelRoute,
        method: Method,
        request: Any,
        body: Mapping[str, Any],
        *,
        request_id: str = "",
    ) -> AsyncIterator[Any]:
        self.calls.append((route, method, request))
        self.request_ids.append(request_id)
        return self.script(route, method, request)

    def requests_by_path(self) -> Mapping[str, int]:
        return {"handle": len(self.calls)}

    def endpoints_by_app(self) -> Mapping[str, int]:
        return {}


def parse_request(method: Method, body: dict[str, Any]) -> Any:
    if "invalid" in body:
        raise ValueError(f"1 validation error for Request\n{body['invalid']}\n  Field required")
    return SimpleNamespace(method=method, body=body)


# ---------------------------------------------------------------- harness


def route(name: str, state: ModelState = ModelState.READY, **extra: Any) -> ModelRoute:
    return ModelRoute(
        name=name,
        app_name=f"model-{name}",
        deployment_name=f"model-{name}:{name}",
        state=state,
        **extra,
    )


def table_of(
    *routes: ModelRoute,
    aliases: Mapping[str, str] | None = None,
    held: Iterable[str] = (),
    version: int = 1,
) -> RoutingTable:
    return RoutingTable(
        version=version,
        models={r.name: r for r in routes},
        aliases=dict(aliases or {}),
        holds=dict.fromkeys(held),
    )


@dataclass
class Harness:
    gateway: Gateway
    client: httpx.AsyncClient
    registry: FakeRegistry
    routes: RouteView
    backend: FakeBackend

    async def chat(self, body: Any, **kwargs: Any) -> httpx.Response:
        return await self.client.post("/v1/chat/completions", json=body, **kwargs)


AUTH = {"Authorization": "Bearer k2"}


@asynccontextmanager
async def serving(
    table: RoutingTable | None = None,
    *,
    script: Script = completion,
    running: dict[str, int] | None = None,
    metrics: Any = None,
    tenant_sync: Any = None,
    **settings: Any,
) -> AsyncIterator[Harness]:
    registry = FakeRegistry(table if table is not None else table_of(route("a")))
    health = FakeHealth(dict(running or {}))
    backend = FakeBackend(script)
    routes = RouteView(registry.fetch)
    replicas = ReplicaHealthView(health.fetch, period_s=float(settings.get("health_poll_s", 0.01)))
    gateway = Gateway(
        GatewaySettings.model_validate({"retry_after_s": int(RETRY_AFTER), **settings}),
        routes,
        replicas,
        backend,
        parse_request,
        metrics=metrics,
        tenants=tenant_sync,
        request_wake=registry.request_wake,
        operator_documents=registry,
    )
    gateway.start()
    try:
        assert await routes.wait_loaded(2.0)
        await wait_until_async(
            lambda: all(replicas.running(a) == n for a, n in health.running.items())
        )
        transport = httpx.ASGITransport(app=gateway.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            yield Harness(gateway, client, registry, routes, backend)
    finally:
        await gateway.stop()


def error_of(response: httpx.Response) -> dict[str, Any]:
    error: dict[str, Any] = response.json()["error"]
    return error


def assert_unavailable(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == RETRY_AFTER
    error = error_of(response)
    assert error["type"] == "service_unavailable"
    return error


def sse_events(text: str) -> list[str]:
    return [block.removeprefix("data: ") for block in text.split("\n\n") if block]


CHAT = {"model": "a", "messages": [{"role": "user", "content": "hi"}]}


def swap_tables() -> tuple[RoutingTable, RoutingTable]:
    before = table_of(route("a"), route("b"), aliases={"default": "a"}, held={"default"})
    after = table_of(route("a"), route("b"), aliases={"default": "b"}, version=2)
    return before, after
