"""The OpenAI gateway, driven over ASGI with fake routes, replica health and model backend."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from domain.model_state import ModelState
from serve_apps.gateway import Gateway
from serve_apps.gateway_settings import GatewaySettings
from serve_apps.model_backend import Method
from serve_apps.replica_health import ReplicaHealthView
from serve_apps.route_view import RouteView
from serve_apps.routing_table import ModelRoute, RoutingTable
from tests.support.waiting import wait_until_async

pytestmark = pytest.mark.anyio

RETRY_AFTER = "7"

# ---------------------------------------------------------------- fakes


class FakeRegistry:
    """The registry's long poll: answers at once when the caller's version is stale."""

    def __init__(self, table: RoutingTable) -> None:
        self.table = table
        self._changed = asyncio.Event()

    def publish(self, table: RoutingTable) -> None:
        self.table = table
        self._changed.set()
        self._changed = asyncio.Event()

    async def fetch(self, known_version: int, timeout_s: float) -> RoutingTable:
        if self.table.version == known_version:
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

    def stream(
        self, route: ModelRoute, method: Method, request: Any, body: Mapping[str, Any]
    ) -> AsyncIterator[Any]:
        self.calls.append((route, method, request))
        return self.script(route, method, request)

    def requests_by_path(self) -> Mapping[str, int]:
        return {"handle": len(self.calls)}


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
        held_aliases=frozenset(held),
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


# ---------------------------------------------------------------- auth


async def test_a_request_without_a_bearer_token_gets_401_when_keys_are_set() -> None:
    async with serving(api_keys=["k1", "k2"]) as h:
        response = await h.chat(CHAT)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert error_of(response)["type"] == "authentication_error"
    assert error_of(response)["code"] == "invalid_api_key"
    assert h.backend.calls == []


@pytest.mark.parametrize("authorization", ["Bearer k3", "Bearer ", "Basic k1", "k1"])
async def test_a_wrong_bearer_token_gets_401(authorization: str) -> None:
    async with serving(api_keys=["k1", "k2"]) as h:
        response = await h.chat(CHAT, headers={"Authorization": authorization})
    assert response.status_code == 401
    assert h.backend.calls == []


async def test_any_of_several_keys_is_accepted() -> None:
    async with serving(api_keys=["k1", "k2"]) as h:
        for key in ("k1", "k2"):
            response = await h.chat(CHAT, headers={"Authorization": f"Bearer {key}"})
            assert response.status_code == 200, response.text


async def test_the_model_list_needs_a_key_too() -> None:
    async with serving(api_keys=["k2"]) as h:
        assert (await h.client.get("/v1/models")).status_code == 401
        assert (await h.client.get("/v1/models", headers=AUTH)).status_code == 200


async def test_health_is_open_without_a_key() -> None:
    async with serving(table_of(route("a"), route("b", ModelState.LOADING)), api_keys=["k"]) as h:
        response = await h.client.get("/health")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "routing_table_version": 1,
        "models_ready": 1,
        "requests_by_path": {"handle": 0},
    }


async def test_without_keys_the_endpoint_is_open() -> None:
    async with serving() as h:
        assert (await h.chat(CHAT)).status_code == 200


async def test_auth_is_checked_before_the_body_size() -> None:
    async with serving(api_keys=["k"], max_body_bytes=1024) as h:
        response = await h.client.post("/v1/chat/completions", content=b"x" * 4096)
    assert response.status_code == 401


# ---------------------------------------------------------------- body limits and parsing


async def test_a_body_over_the_limit_by_content_length_gets_413() -> None:
    async with serving(max_body_bytes=1024) as h:
        body = {**CHAT, "padding": "x" * 2000}
        response = await h.chat(body)
    assert response.status_code == 413
    assert error_of(response)["code"] == "request_too_large"
    assert "larger than 1024 bytes" in error_of(response)["message"]
    assert h.backend.calls == []


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def test_a_chunked_body_over_the_limit_gets_413() -> None:
    async with serving(max_body_bytes=1024) as h:
        response = await h.client.post(
            "/v1/chat/completions", content=_chunks(b'{"model": "a", "p": "', b"x" * 1100, b'"}')
        )
    assert response.status_code == 413
    assert error_of(response)["code"] == "request_too_large"
    assert h.backend.calls == []


async def test_a_chunked_body_under_the_limit_is_read_whole() -> None:
    async with serving(max_body_bytes=1024) as h:
        response = await h.client.post(
            "/v1/chat/completions", content=_chunks(b'{"model": ', b'"a", "messages"', b": []}")
        )
    assert response.status_code == 200, response.text
    (_, _, request) = h.backend.calls[0]
    assert request.body == {"model": "a", "messages": []}


@pytest.mark.parametrize(
    ("content", "code", "message"),
    [
        (b"{not json", "invalid_json", "Request body is not valid JSON"),
        (b"\xff\xfe", "invalid_json", "Request body is not valid JSON"),
        (b"", "invalid_json", "Request body is not valid JSON"),
        (b"[1, 2]", "invalid_request", "Request body must be a JSON object."),
        (b'"model"', "invalid_request", "Request body must be a JSON object."),
        (b'{"messages": []}', "invalid_request", "The 'model' field is required"),
        (b'{"model": 5}', "invalid_request", "The 'model' field is required"),
        (b'{"model": ""}', "invalid_request", "The 'model' field is required"),
    ],
)
async def test_a_malformed_body_gets_400(content: bytes, code: str, message: str) -> None:
    async with serving() as h:
        response = await h.client.post("/v1/chat/completions", content=content)
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == code
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(message)
    assert h.backend.calls == []


async def test_a_deeply_nested_body_gets_400_not_a_crash() -> None:
    async with serving(max_body_bytes=1024 * 1024) as h:
        response = await h.client.post("/v1/chat/completions", content=b"[" * 100_000)
    assert response.status_code == 400


async def test_a_request_the_parser_refuses_gets_400_with_its_first_lines() -> None:
    async with serving() as h:
        response = await h.chat({**CHAT, "invalid": "messages"})
    assert response.status_code == 400
    error = error_of(response)
    assert error["message"] == "1 validation error for Request messages Field required"
    assert error["code"] == "invalid_request"
    assert h.backend.calls == []


# ---------------------------------------------------------------- resolution


async def test_an_unknown_model_gets_404() -> None:
    async with serving() as h:
        response = await h.chat({**CHAT, "model": "gpt-9"})
    assert response.status_code == 404
    error = error_of(response)
    assert (error["code"], error["param"]) == ("model_not_found", "model")
    assert "'gpt-9' does not exist" in error["message"]
    assert "retry-after" not in response.headers


async def test_a_removed_model_gets_404_naming_its_replacement() -> None:
    table = table_of(route("old", ModelState.REMOVED, replaced_by="new"), route("new"))
    async with serving(table) as h:
        response = await h.chat({**CHAT, "model": "old"})
    assert response.status_code == 404
    assert "send requests to 'new' instead" in error_of(response)["message"]


@pytest.mark.parametrize(
    "state", [ModelState.LOADING, ModelState.DRAINING, ModelState.DEGRADED], ids=str
)
async def test_a_model_that_is_not_ready_gets_503_with_retry_after(state: ModelState) -> None:
    async with serving(table_of(route("a", state))) as h:
        response = await h.chat(CHAT)
    error = assert_unavailable(response)
    assert error["code"] == "model_unavailable"
    assert f"is {state.value}" in error["message"]
    assert h.backend.calls == []


async def test_a_failed_model_gets_503_with_its_error() -> None:
    async with serving(table_of(route("a", ModelState.FAILED, error="no GPU left"))) as h:
        response = await h.chat(CHAT)
    assert "failed to start: no GPU left" in assert_unavailable(response)["message"]


async def test_a_model_with_no_running_replica_gets_503() -> None:
    async with serving(running={"model-a": 0}) as h:
        response = await h.chat(CHAT)
    assert "has no running replica" in assert_unavailable(response)["message"]
    assert h.backend.calls == []


async def test_health_older_than_the_last_routing_change_does_not_refuse_a_ready_model() -> None:
    # A rolled-back model is redeployed under the same app name and published READY by the
    # manager after its own warm-up; a "0 replicas" seen before that must not refuse it.
    async with serving(running={"model-a": 0}, health_poll_s=60) as h:
        assert (await h.chat(CHAT)).status_code == 503
        h.registry.publish(table_of(route("a"), version=2))
        await wait_until_async(lambda: h.routes.table.version == 2)
        assert (await h.chat(CHAT)).status_code == 200


async def test_a_model_with_running_replicas_or_unknown_health_is_forwarded() -> None:
    table = table_of(route("a"), route("b"))
    async with serving(table, running={"model-a": 2}) as h:
        assert (await h.chat(CHAT)).status_code == 200
        assert (await h.chat({**CHAT, "model": "b"})).status_code == 200


async def test_an_alias_is_forwarded_under_the_models_own_name() -> None:
    async with serving(table_of(route("a"), aliases={"default": "a"})) as h:
        response = await h.chat({**CHAT, "model": "default"})
    assert response.status_code == 200
    ((sent_route, method, request),) = h.backend.calls
    assert (sent_route.name, method) == ("a", "chat")
    assert request.body["model"] == "a"


# ---------------------------------------------------------------- forwarding


async def test_a_non_streaming_answer_is_passed_through_as_json() -> None:
    answer = {"id": "cmpl-1", "object": "chat.completion", "choices": [{"index": 0}]}
    async with serving(script=yields(FakeResponse(answer))) as h:
        response = await h.chat(CHAT)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == answer


async def test_completions_are_forwarded_as_completions() -> None:
    async with serving() as h:
        response = await h.client.post("/v1/completions", json={"model": "a", "prompt": "x"})
    assert response.status_code == 200
    assert h.backend.calls[0][1] == "completions"
    assert h.backend.calls[0][2].method == "completions"


async def test_a_streamed_answer_is_passed_through_as_sse() -> None:
    chunks = [
        ['data: {"n": 1}\n\n', 'data: {"n": 2}\n\n'],
        ['data: {"n": 3}\n\n'],
        ["data: [DONE]\n\n"],
    ]
    async with serving(script=yields(*chunks)) as h:
        response = await h.chat({**CHAT, "stream": True})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text == "".join(part for chunk in chunks for part in chunk)


async def test_streamed_objects_are_sent_as_sse_data_lines() -> None:
    async with serving(script=yields(FakeResponse({"n": 1}), "data: [DONE]\n\n")) as h:
        response = await h.chat({**CHAT, "stream": True})
    assert sse_events(response.text) == ['{"n": 1}', "[DONE]"]


async def test_a_mid_stream_exception_ends_the_stream_with_an_error_event_and_done() -> None:
    script = yields(['data: {"n": 1}\n\n'], then=RuntimeError("engine died"))
    async with serving(script=script) as h:
        response = await h.chat({**CHAT, "stream": True})
    assert response.status_code == 200
    events = sse_events(response.text)
    assert events[0] == '{"n": 1}'
    assert events[-1] == "[DONE]"
    error = json.loads(events[1])["error"]
    assert error["type"] == "service_unavailable"
    assert "could not serve the request (RuntimeError)" in error["message"]
    assert len(events) == 3


async def test_a_mid_stream_error_object_ends_the_stream() -> None:
    script = yields(
        ['data: {"n": 1}\n\n'],
        error_response("context too long", 400),
        ['data: {"never": true}\n\n'],
    )
    async with serving(script=script) as h:
        response = await h.chat({**CHAT, "stream": True})
    events = sse_events(response.text)
    assert events[0] == '{"n": 1}'
    assert json.loads(events[1])["error"]["message"] == "context too long"
    assert events[2:] == ["[DONE]"]


# ---------------------------------------------------------------- backend failures


async def test_a_backend_that_raises_before_the_first_chunk_gets_503() -> None:
    async with serving(script=yields(then=ConnectionError("replica gone"))) as h:
        response = await h.chat(CHAT)
    message = assert_unavailable(response)["message"]
    assert "could not serve the request (ConnectionError)" in message


async def test_a_backend_whose_stream_call_itself_raises_gets_503() -> None:
    def lookup_fails(route: ModelRoute, method: Method, request: Any) -> AsyncIterator[Any]:
        raise KeyError("no such deployment")

    async with serving(script=lookup_fails) as h:
        response = await h.chat(CHAT)
        assert h.gateway.in_flight["a"] == 0
    assert "could not serve the request (KeyError)" in assert_unavailable(response)["message"]


async def test_a_first_chunk_that_never_comes_times_out_with_503() -> None:
    cancelled = asyncio.Event()

    async def silent(route: ModelRoute, method: Method, request: Any) -> AsyncIterator[Any]:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        yield "never"

    async with serving(script=silent, first_chunk_timeout_s=0.05) as h:
        response = await h.chat(CHAT)
        assert h.gateway.in_flight["a"] == 0
    assert "sent nothing for 0.05 s" in assert_unavailable(response)["message"]
    assert cancelled.is_set()


async def test_a_backend_that_yields_nothing_gets_502() -> None:
    async with serving(script=yields()) as h:
        response = await h.chat(CHAT)
    assert response.status_code == 502
    assert error_of(response)["type"] == "server_error"


async def test_a_4xx_error_object_as_the_first_chunk_keeps_its_status() -> None:
    async with serving(script=yields(error_response("max_tokens is too large", 400))) as h:
        response = await h.chat({**CHAT, "stream": True})
    assert response.status_code == 400
    assert "retry-after" not in response.headers
    assert error_of(response) == {
        "message": "max_tokens is too large",
        "type": "invalid_request_error",
        "param": None,
        "code": "BadRequestError",
    }


@pytest.mark.parametrize("code", [500, 503, None, "oops"])
async def test_a_5xx_or_unknown_error_object_as_the_first_chunk_gets_503(code: Any) -> None:
    script = yields(error_response("engine is dead", code, "InternalServerError"))
    async with serving(script=script) as h:
        response = await h.chat(CHAT)
    error = assert_unavailable(response)
    assert error["message"] == "engine is dead"


# ---------------------------------------------------------------- holds during swaps


def swap_tables() -> tuple[RoutingTable, RoutingTable]:
    before = table_of(route("a"), route("b"), aliases={"default": "a"}, held={"default"})
    after = table_of(route("a"), route("b"), aliases={"default": "b"}, version=2)
    return before, after


async def test_a_held_alias_waits_and_is_forwarded_to_the_new_model() -> None:
    before, after = swap_tables()
    async with serving(before) as h:
        request = asyncio.create_task(h.chat({**CHAT, "model": "default"}))
        await wait_until_async(lambda: h.gateway.held == 1)
        assert not request.done()
        assert h.backend.calls == []
        h.registry.publish(after)
        response = await request
        assert h.gateway.held == 0
    assert response.status_code == 200, response.text
    ((sent_route, _, parsed),) = h.backend.calls
    assert sent_route.name == "b"
    assert parsed.body["model"] == "b"


async def test_a_table_change_that_keeps_the_hold_keeps_waiting() -> None:
    before, after = swap_tables()
    still_held = table_of(route("a"), aliases={"default": "a"}, held={"default"}, version=5)
    async with serving(before) as h:
        request = asyncio.create_task(h.chat({**CHAT, "model": "default"}))
        await wait_until_async(lambda: h.gateway.held == 1)
        h.registry.publish(still_held)
        await wait_until_async(lambda: h.routes.table.version == 5)
        await asyncio.sleep(0.02)
        assert not request.done()
        h.registry.publish(after)
        response = await request
    assert response.status_code == 200
    assert h.backend.calls[0][0].name == "b"


async def test_a_held_request_is_refused_when_the_hold_queue_is_full() -> None:
    before, _ = swap_tables()
    async with serving(before, max_held_requests=0) as h:
        response = await h.chat({**CHAT, "model": "default"})
    assert "hold queue is full" in assert_unavailable(response)["message"]


async def test_a_held_request_gets_503_when_the_hold_times_out() -> None:
    before, _ = swap_tables()
    async with serving(before, hold_timeout_s=0.05, max_held_requests=1) as h:
        first = await h.chat({**CHAT, "model": "default"})
        # The timed-out request gave its place in the queue back.
        second = await h.chat({**CHAT, "model": "default"})
    for response in (first, second):
        assert "still being switched after 0.05 s" in assert_unavailable(response)["message"]
    assert h.backend.calls == []


async def test_a_hold_released_onto_a_loading_model_gets_503() -> None:
    before, _ = swap_tables()
    loading = table_of(
        route("a"), route("b", ModelState.LOADING), aliases={"default": "b"}, version=2
    )
    async with serving(before) as h:
        request = asyncio.create_task(h.chat({**CHAT, "model": "default"}))
        await wait_until_async(lambda: h.gateway.held == 1)
        h.registry.publish(loading)
        response = await request
    assert "'b' is loading" in assert_unavailable(response)["message"]


# ---------------------------------------------------------------- in-flight accounting


async def test_in_flight_returns_to_zero_after_a_non_streaming_request() -> None:
    async with serving() as h:
        assert (await h.chat(CHAT)).status_code == 200
        assert h.gateway.in_flight["a"] == 0


async def test_in_flight_counts_a_stream_until_it_ends() -> None:
    release = asyncio.Event()

    async def slow(route: ModelRoute, method: Method, request: Any) -> AsyncIterator[Any]:
        yield ['data: {"n": 1}\n\n']
        await release.wait()
        yield ["data: [DONE]\n\n"]

    async with serving(script=slow) as h:
        request = asyncio.create_task(h.chat({**CHAT, "stream": True}))
        await wait_until_async(lambda: h.gateway.in_flight["a"] == 1)
        release.set()
        response = await request
        assert response.status_code == 200
        assert h.gateway.in_flight["a"] == 0


@pytest.mark.parametrize(
    "script",
    [
        yields(['data: {"n": 1}\n\n'], then=RuntimeError("boom")),
        yields(then=RuntimeError("boom")),
        yields(error_response("bad", 400)),
        yields(),
    ],
    ids=["mid-stream", "before-first", "error-object", "empty"],
)
async def test_in_flight_returns_to_zero_after_failures(script: Script) -> None:
    async with serving(script=script) as h:
        await h.chat({**CHAT, "stream": True})
        await h.chat(CHAT)
        assert h.gateway.in_flight["a"] == 0


# ---------------------------------------------------------------- model list


async def test_the_model_list_shows_live_models_with_aliases_and_alias_entries() -> None:
    table = table_of(
        route("b", ModelState.LOADING, layout="TP2xPP1xDP1"),
        route("a", layout="TP1xPP1xDP1"),
        route("gone", ModelState.REMOVED, replaced_by="a"),
        aliases={"default": "a", "fast": "a", "big": "b"},
    )
    async with serving(table) as h:
        response = await h.client.get("/v1/models")
    assert response.status_code == 200
    listing = response.json()
    assert listing["object"] == "list"
    entries = {entry["id"]: entry for entry in listing["data"]}
    assert [entry["id"] for entry in listing["data"]] == ["a", "b", "big", "default", "fast"]
    assert entries["a"] == {
        "id": "a",
        "object": "model",
        "created": 0,
        "owned_by": "switchyard",
        "state": "ready",
        "aliases": ["default", "fast"],
        "layout": "TP1xPP1xDP1",
    }
    assert entries["b"]["state"] == "loading"
    assert entries["b"]["aliases"] == ["big"]
    assert entries["default"] == {
        "id": "default",
        "object": "model",
        "created": 0,
        "owned_by": "switchyard",
        "alias_for": "a",
    }
    assert "gone" not in entries


async def test_a_degraded_model_this_gateway_sees_running_again_is_served() -> None:
    # The manager's DEGRADED mark comes from its own poll of Serve and can lag a replica
    # Serve has already replaced: health this gateway saw after the mark overrides it.
    async with serving(table_of(route("a", ModelState.DEGRADED)), running={"model-a": 1}) as h:
        await asyncio.sleep(0.05)  # a few 10 ms health polls after the table loaded
        assert (await h.chat(CHAT)).status_code == 200


async def test_a_degraded_model_with_no_running_replica_is_still_refused() -> None:
    async with serving(table_of(route("a", ModelState.DEGRADED)), running={"model-a": 0}) as h:
        await asyncio.sleep(0.05)  # a few 10 ms health polls after the table loaded
        response = await h.chat(CHAT)
    assert "is degraded" in assert_unavailable(response)["message"]
