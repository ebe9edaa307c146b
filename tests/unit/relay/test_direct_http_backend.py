"""The gateway's direct data path: streaming from an engine replica's HTTP port.

A real HTTP server (`AsgiListener`, uvicorn) on loopback plays the engine replica's vLLM app
behind `BearerTokenGuard`; the fallback is a fake Serve-handle backend. No Ray.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx
import pytest

from domain.model_state import ModelState
from serve_apps.asgi_listener import AsgiListener
from serve_apps.engine.bearer_token_guard import BearerTokenGuard
from serve_apps.gateway.http_errors import model_server_error
from serve_apps.registry.engine_endpoint import EngineEndpoint
from serve_apps.registry.routing_table import ModelRoute
from serve_apps.relay.direct_backend import DirectHttpBackend, EngineEndpointView
from serve_apps.relay.engine_events import complete_events, engine_http_error, split_at_error_event
from serve_apps.relay.model_backend import Method
from tests.support.asgi_apps import request_body

pytestmark = pytest.mark.anyio

TOKEN = "engine-token"
ROUTE = ModelRoute("m", "model-m", "model-m:m", ModelState.READY)


# ---------------------------------------------------------------- an engine replica's app


@dataclass
class FakeEngineApp:
    """Answers like vLLM's OpenAI app: SSE split mid-event across writes, JSON, errors."""

    bodies: list[dict[str, Any]] = field(default_factory=list)

    DEAD = b'data: {"error": {"message": "EngineCore encountered an issue.", "type": "InternalServerError", "param": null, "code": 500}}\n\n'  # noqa: E501
    STREAMS: ClassVar[dict[str, tuple[bytes, ...]]] = {
        "hi": (
            b'data: {"choices":[{"text":"a"}]}\n\ndata: {"choi',
            b'ces":[{"text":"b"}]}\n\n',
            b"data: [DONE]\n\n",
        ),
        # vLLM has already answered 200 when a dead engine surfaces: the error is an event.
        "dead": (DEAD + b"data: [DONE]\n\n",),
        "dies-later": (b'data: {"choices":[{"text":"a"}]}\n\n' + DEAD, b"data: [DONE]\n\n"),
    }

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        raw = await request_body(receive)
        body = json.loads(raw)
        self.bodies.append(body)
        if body.get("prompt") == "template-fails":
            error = {"message": "tool parser failed", "type": "InternalServerError", "code": 500}
            await self._answer(send, 500, {"error": {**error, "param": None}})
            return
        if body.get("prompt") == "bad":
            await self._answer(
                send,
                400,
                {"error": {"message": "too long", "type": "Bad", "param": "prompt", "code": 400}},
            )
            return
        if not body.get("stream"):
            await self._answer(send, 200, {"object": "text_completion", "model": body["model"]})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for part in self.STREAMS.get(body.get("prompt"), self.STREAMS["hi"]):
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    @staticmethod
    async def _answer(send: Any, status: int, payload: dict[str, Any]) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


@dataclass
class FallbackBackend:
    calls: int = 0

    def stream(
        self, route: ModelRoute, method: Method, request: Any, body: Mapping[str, Any], **_: Any
    ) -> AsyncIterator[Any]:
        self.calls += 1

        async def one() -> AsyncIterator[Any]:
            yield {"via": "handle"}

        return one()

    def requests_by_path(self) -> Mapping[str, int]:
        return {"handle": self.calls}

    def endpoints_by_app(self) -> Mapping[str, int]:
        return {}


@pytest.fixture
async def engine() -> AsyncIterator[tuple[FakeEngineApp, AsgiListener]]:
    app = FakeEngineApp()
    listener = AsgiListener(BearerTokenGuard(app, TOKEN), "127.0.0.1")
    await listener.start()
    try:
        yield app, listener
    finally:
        await listener.stop()


def endpoint_at(url: str, token: str = TOKEN, app_name: str = "model-m") -> EngineEndpoint:
    return EngineEndpoint(app_name=app_name, replica_id="r1", url=url, token=token)


def backend_with(*endpoints: EngineEndpoint) -> tuple[DirectHttpBackend, FallbackBackend]:
    view = EngineEndpointView(_no_fetch, period_s=1.0)
    view.update(list(endpoints))
    fallback = FallbackBackend()
    return DirectHttpBackend(view, fallback), fallback


async def _no_fetch() -> list[EngineEndpoint]:
    return []


async def collect(backend: DirectHttpBackend, body: dict[str, Any]) -> list[Any]:
    method: Method = "completions"
    try:
        return [item async for item in backend.stream(ROUTE, method, None, body)]
    finally:
        await backend.close()


# ---------------------------------------------------------------- specifications


async def test_a_stream_is_passed_on_in_whole_sse_events(engine: Any) -> None:
    app, listener = engine
    backend, fallback = backend_with(endpoint_at(listener.url))
    items = await collect(backend, {"model": "m", "prompt": "hi", "stream": True})
    assert b"".join(items) == (
        b'data: {"choices":[{"text":"a"}]}\n\ndata: {"choices":[{"text":"b"}]}\n\ndata: [DONE]\n\n'
    )
    # Whole events, as the engine's bytes: the relay never decodes them.
    assert all(isinstance(item, bytes) and item.endswith(b"\n\n") for item in items)
    assert fallback.calls == 0
    assert app.bodies == [{"model": "m", "prompt": "hi", "stream": True}]


async def test_a_non_streaming_answer_is_one_json_object(engine: Any) -> None:
    _, listener = engine
    backend, _ = backend_with(endpoint_at(listener.url))
    assert await collect(backend, {"model": "m", "prompt": "hi"}) == [
        {"object": "text_completion", "model": "m"}
    ]


async def test_an_engine_error_answer_becomes_the_gateway_error_with_its_status(
    engine: Any,
) -> None:
    _, listener = engine
    backend, _ = backend_with(endpoint_at(listener.url))
    (item,) = await collect(backend, {"model": "m", "prompt": "bad"})
    error = model_server_error(item, retry_after_s=5)
    assert error is not None
    assert (error.status, error.param) == (400, "prompt")
    assert "too long" in str(error.body())


async def test_a_dead_engines_error_event_before_any_token_becomes_a_503_and_is_avoided(
    engine: Any,
) -> None:
    _, listener = engine
    backend, fallback = backend_with(endpoint_at(listener.url))
    (item,) = await collect(backend, {"model": "m", "prompt": "dead", "stream": True})
    error = model_server_error(item, retry_after_s=5)
    assert error is not None
    assert (error.status, error.retry_after_s) == (503, 5)
    assert "EngineCore" in str(error.body())
    # Until Serve replaces the replica, its requests go elsewhere (here: the handle).
    assert await collect(backend, {"model": "m", "prompt": "hi"}) == [{"via": "handle"}]
    assert fallback.calls == 1


async def test_an_engines_own_500_stays_a_500_and_the_engine_keeps_its_requests(
    engine: Any,
) -> None:
    _, listener = engine
    backend, fallback = backend_with(endpoint_at(listener.url))
    (item,) = await collect(backend, {"model": "m", "prompt": "template-fails"})
    error = model_server_error(item, retry_after_s=5)
    assert error is not None
    assert (error.status, error.retry_after_s) == (500, None)
    assert error.body()["error"]["type"] == "server_error"
    # The engine is healthy: its next request still goes to it, not around it.
    assert await collect(backend, {"model": "m", "prompt": "hi"}) == [
        {"object": "text_completion", "model": "m"}
    ]
    assert fallback.calls == 0


async def test_an_error_event_after_tokens_ends_the_stream_after_those_tokens(
    engine: Any,
) -> None:
    _, listener = engine
    backend, _ = backend_with(endpoint_at(listener.url))
    items = await collect(backend, {"model": "m", "prompt": "dies-later", "stream": True})
    assert items[0] == b'data: {"choices":[{"text":"a"}]}\n\n'
    assert len(items) == 2
    error = model_server_error(items[1], retry_after_s=5)
    assert error is not None and error.status == 503


def test_only_a_whole_error_event_counts_as_an_error() -> None:
    token = b'data: {"choices":[{"text":"data: {\\"error\\""}]}\n\n'
    assert split_at_error_event(token) == (token, None)
    before, error = split_at_error_event(
        b'data: {"choices":[]}\n\ndata: {"error": {"message": "x", "code": 400}}\n\n'
    )
    assert before == b'data: {"choices":[]}\n\n'
    assert error is not None and (error.error.code, error.error.message) == (400, "x")


async def test_an_unreachable_endpoint_falls_back_to_the_handle_and_is_avoided_for_a_while() -> (
    None
):
    backend, fallback = backend_with(endpoint_at("http://127.0.0.1:9"))
    assert await collect(backend, {"model": "m", "prompt": "hi"}) == [{"via": "handle"}]
    # The next request does not try the failed endpoint again at once.
    assert await collect(backend, {"model": "m", "prompt": "hi"}) == [{"via": "handle"}]
    assert fallback.calls == 2


async def test_a_model_without_a_registered_endpoint_uses_the_handle() -> None:
    backend, fallback = backend_with(endpoint_at("http://127.0.0.1:9", app_name="model-other"))
    assert await collect(backend, {"model": "m", "prompt": "hi"}) == [{"via": "handle"}]
    assert fallback.calls == 1


async def test_a_model_registered_since_the_last_refresh_is_reached_directly_at_once(
    engine: Any,
) -> None:
    """A model that has just started (a swap, a wake) is registered before it is published
    ready: its first requests look again instead of waiting on a Serve handle new to the
    gateway."""
    app, listener = engine
    fetched: list[int] = []

    async def fetch() -> list[EngineEndpoint]:
        fetched.append(1)
        return [endpoint_at(listener.url)]

    fallback = FallbackBackend()
    backend = DirectHttpBackend(EngineEndpointView(fetch, period_s=60.0), fallback)
    items = await collect(backend, {"model": "m", "prompt": "hi"})
    assert items and fallback.calls == 0 and len(app.bodies) == 1
    assert fetched == [1]


async def test_a_model_without_an_endpoint_looks_again_at_most_once_per_period() -> None:
    fetched: list[int] = []

    async def fetch() -> list[EngineEndpoint]:
        fetched.append(1)
        return []

    fallback = FallbackBackend()
    backend = DirectHttpBackend(EngineEndpointView(fetch, period_s=60.0), fallback)
    for _ in range(3):
        assert await collect(backend, {"model": "m", "prompt": "hi"}) == [{"via": "handle"}]
    assert fallback.calls == 3 and fetched == [1]


async def test_the_engine_port_refuses_callers_without_the_token(engine: Any) -> None:
    app, listener = engine
    async with httpx.AsyncClient() as client:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            answer = await client.post(f"{listener.url}/v1/completions", json={}, headers=headers)
            assert answer.status_code == 401
    assert app.bodies == []


def test_complete_events_keeps_a_partial_event_for_later() -> None:
    assert complete_events(b"data: 1\n\ndata: 2") == (b"data: 1\n\n", b"data: 2")
    assert complete_events(b"data: 2") == (b"", b"data: 2")


def test_error_answers_in_vllms_old_and_new_shapes_and_non_json() -> None:
    new = engine_http_error(404, b'{"error": {"message": "no model", "type": "NotFound"}}')
    old = engine_http_error(400, b'{"object": "error", "message": "bad", "type": "BadRequest"}')
    text = engine_http_error(502, b"Bad Gateway")
    assert (new.error.message, new.error.code, new.error.type) == ("no model", 404, "NotFound")
    assert (old.error.message, old.error.code) == ("bad", 400)
    assert (text.error.message, text.error.code) == ("Bad Gateway", 502)


def test_an_endpoint_expires_after_three_missed_refreshes() -> None:
    endpoint = EngineEndpoint("a", "r", "http://h:1", "s3cret-token", refresh_period_s=5.0)
    assert not endpoint.expired(24.9)
    assert endpoint.expired(25.1)
    assert "s3cret" not in repr(endpoint)


def test_the_endpoints_it_knows_are_counted_per_app() -> None:
    # `/health` shows these, so a replica that has started but is not yet known to the
    # direct path (its requests still go through the handle) can be told apart.
    backend, _ = backend_with(
        endpoint_at("http://10.0.0.1:1"),
        EngineEndpoint(app_name="model-m", replica_id="r2", url="http://10.0.0.2:1", token=TOKEN),
        endpoint_at("http://10.0.0.3:1", app_name="model-n"),
    )
    assert backend.endpoints_by_app() == {"model-m": 2, "model-n": 1}
