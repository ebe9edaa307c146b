"""The relay's per-token path: engine bytes written to the client from inside the read.

A gateway served by uvicorn (`AsgiListener`, as in a gateway replica) in front of a fake
engine served the same way, over loopback TCP; the backend is the direct one. The relay must
keep everything the pulled path does: usage accounting and stripping, TTFT and inter-token
timings, the engine's error events, a client that leaves aborting the engine's request, and
back-pressure from a slow client. No Ray.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from serve_apps.asgi_listener import AsgiListener
from serve_apps.gateway.app import Gateway
from serve_apps.gateway.gateway_metrics import RecordingGatewayMetrics, RequestOutcome
from serve_apps.gateway.gateway_settings import GatewaySettings
from serve_apps.gateway.request_timing import RequestTiming
from serve_apps.internals import chunk_writer
from serve_apps.registry.engine_endpoint import EngineEndpoint
from serve_apps.registry.replica_health import ReplicaHealthView
from serve_apps.registry.route_view import RouteView
from serve_apps.relay.direct_backend import DirectHttpBackend, EngineEndpointView
from serve_apps.relay.direct_stream import DirectStream
from serve_apps.relay.engine_connections import EngineConnections
from serve_apps.relay.streamed_answer import StreamRelay
from tests.support.asgi_apps import on_both_event_loops, request_body  # noqa: F401 (a fixture)
from tests.unit.gateway.gateway_harness import (
    FakeHealth,
    FakeRegistry,
    parse_request,
    route,
    table_of,
)

pytestmark = pytest.mark.anyio


TOKENS = 6
USAGE = {"prompt_tokens": 3, "completion_tokens": TOKENS, "total_tokens": 3 + TOKENS}


def token_event(i: int) -> bytes:
    return b'data: {"choices":[{"index":0,"delta":{"content":"t%d"}}]}\n\n' % i


@dataclass
class StreamingEngine:
    """vLLM's streamed chat answer: a token event every 2 ms, a usage-only event, [DONE].

    `{"prompt": "dies"}`: an error event after two tokens; `"endless"`: tokens until the
    client leaves (then `left` is set)."""

    left: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        raw = await request_body(receive)
        body = json.loads(raw)
        prompt = body["messages"][0]["content"]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        disconnected = asyncio.ensure_future(receive())
        count = 10**6 if prompt == "endless" else TOKENS
        for i in range(count):
            if disconnected.done():
                self.left.set()
                return
            await send({"type": "http.response.body", "body": token_event(i), "more_body": True})
            if prompt == "dies" and i == 1:
                error = {"error": {"message": "EngineCore died", "type": "Internal", "code": 500}}
                data = b"data: " + json.dumps(error).encode() + b"\n\ndata: [DONE]\n\n"
                await send({"type": "http.response.body", "body": data})
                return
            await asyncio.sleep(0.002)
        usage = b'data: {"choices":[],"usage":' + json.dumps(USAGE).encode() + b"}\n\n"
        await send({"type": "http.response.body", "body": usage, "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


@dataclass
class Stack:
    engine: StreamingEngine
    gateway_url: str
    metrics: RecordingGatewayMetrics
    gateway: Gateway
    pushed: list[bool]

    def chat(self, content: str, **extra: Any) -> dict[str, Any]:
        return {
            "model": "a",
            "stream": True,
            "messages": [{"role": "user", "content": content}],
            **extra,
        }


async def _no_fetch() -> list[EngineEndpoint]:
    return []


@pytest.fixture
async def stack(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Stack]:
    engine = StreamingEngine()
    engine_listener = AsgiListener(engine, "127.0.0.1")
    await engine_listener.start()
    view = EngineEndpointView(_no_fetch, period_s=1.0)
    view.update([EngineEndpoint("model-a", "r1", engine_listener.url, "t")])
    backend = DirectHttpBackend(view, fallback=None)  # type: ignore[arg-type]
    registry = FakeRegistry(table_of(route("a")))
    metrics = RecordingGatewayMetrics()
    gateway = Gateway(
        GatewaySettings.model_validate({"retry_after_s": 7}),
        RouteView(registry.fetch),
        ReplicaHealthView(FakeHealth().fetch, period_s=0.01),
        backend,
        parse_request,
        metrics=metrics,
    )
    # Which way each stream went: a writer found means the pushed path.
    pushed: list[bool] = []

    def spying_writer(send: Any) -> Any:
        writer = chunk_writer(send)
        pushed.append(writer is not None)
        return writer

    monkeypatch.setattr("serve_apps.relay.client_response.chunk_writer", spying_writer)
    gateway.start()
    listener = AsgiListener(gateway.app, "127.0.0.1")
    await listener.start()
    try:
        yield Stack(engine, listener.url, metrics, gateway, pushed)
    finally:
        await listener.stop()
        await gateway.stop()
        await backend.close()
        await engine_listener.stop()


async def _events(stack: Stack, body: dict[str, Any]) -> list[str]:
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=10) as client:
        response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200
    return [e.removeprefix("data: ") for e in response.text.split("\n\n") if e]


async def test_tokens_reach_the_client_as_the_engine_sent_them_and_are_timed(
    stack: Stack,
) -> None:
    events = await _events(stack, stack.chat("hi"))
    assert stack.pushed == [True]
    assert events == [token_event(i).decode()[6:-2] for i in range(TOKENS)] + ["[DONE]"]
    # The usage report the gateway asked for (and the client did not) is counted, not sent.
    (record,) = stack.metrics.requests
    assert (record.outcome, record.status_code) == (RequestOutcome.OK, 200)
    assert (record.prompt_tokens, record.generated_tokens) == (3, TOKENS)
    assert record.ttft_s is not None and len(record.inter_token_s) == TOKENS - 1
    assert stack.gateway._forwarder.in_flight["a"] == 0


async def test_a_client_that_asked_for_usage_gets_the_report(stack: Stack) -> None:
    events = await _events(stack, stack.chat("hi", stream_options={"include_usage": True}))
    assert json.loads(events[-2])["usage"] == USAGE
    assert stack.metrics.requests[0].generated_tokens == TOKENS


async def test_an_engine_error_after_tokens_ends_the_stream_with_an_error_event(
    stack: Stack,
) -> None:
    events = await _events(stack, stack.chat("dies"))
    assert events[:2] == [token_event(0).decode()[6:-2], token_event(1).decode()[6:-2]]
    assert json.loads(events[2])["error"]["message"] == "EngineCore died"
    assert events[3:] == ["[DONE]"]
    assert stack.metrics.requests[0].outcome == RequestOutcome.STREAM_ERROR


async def test_a_client_that_leaves_aborts_the_engines_request(stack: Stack) -> None:
    async with (
        httpx.AsyncClient(base_url=stack.gateway_url, timeout=10) as client,
        client.stream("POST", "/v1/chat/completions", json=stack.chat("endless")) as response,
    ):
        async for _ in response.aiter_bytes():
            break  # one chunk, then the client hangs up
    await asyncio.wait_for(stack.engine.left.wait(), 5)
    for _ in range(100):
        if stack.metrics.requests:
            break
        await asyncio.sleep(0.02)
    assert stack.metrics.requests[0].outcome == RequestOutcome.CANCELLED
    assert stack.gateway._forwarder.in_flight["a"] == 0


@dataclass
class SlowClient:
    """A client socket whose buffer is full after the first chunk, until `drain()`."""

    written: list[bytes] = field(default_factory=list)
    paused: bool = False
    _drained: asyncio.Event = field(default_factory=asyncio.Event)

    def write(self, data: bytes) -> None:
        self.written.append(data)
        self.paused = True

    async def drained(self) -> None:
        await self._drained.wait()

    def drain(self) -> None:
        self.paused = False
        self._drained.set()


async def test_a_slow_client_holds_the_engines_connection_until_it_has_read(
    stack: Stack,
) -> None:
    engine_url = stack.gateway._backend._endpoints.for_app("model-a")[0].url  # type: ignore[attr-defined]
    connections = EngineConnections()
    body = json.dumps(stack.chat("hi")).encode()
    stream = DirectStream(
        lambda: connections.request(engine_url, "/v1/chat/completions", {}, body),
        streaming=True,
        fallback=lambda: None,  # type: ignore[arg-type,return-value]
        use=_Use(),
    )
    first = await anext(stream)
    relay = StreamRelay(
        route("a"),
        first,
        stream,
        timing=RequestTiming(),
        release=lambda: None,
        metrics=RecordingGatewayMetrics(),
        retry_after_s=7,
        failure=lambda r, e: None,  # type: ignore[arg-type,return-value]
    )
    client = SlowClient()
    done = relay.push(client)
    assert done is not None
    await asyncio.sleep(0.1)  # the engine keeps sending; the gateway stops reading
    held = len(client.written)
    assert held < TOKENS
    connection = stream._response._connection  # type: ignore[union-attr]
    assert connection.transport is not None and not connection.transport.is_reading()
    client.drain()
    await asyncio.wait_for(done, 5)
    assert b"".join(client.written).count(b'"choices":[{') == TOKENS
    await connections.close()


class _Use:
    def sent(self) -> None: ...

    def unreachable(self, error: Any) -> None: ...

    def engine_error(self, error: Any) -> None: ...

    def done(self) -> None: ...
