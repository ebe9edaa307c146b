"""The gateway's connections to engine ports: framing, keep-alive reuse, failures.

A real uvicorn server on loopback (`AsgiListener`) plays the engine; no Ray.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from serve_apps.asgi_listener import AsgiListener
from serve_apps.relay.engine_connections import (
    EngineAddress,
    EngineConnectionLost,
    EngineConnections,
    EngineUnreachable,
)
from tests.support.asgi_apps import on_both_event_loops, request_body  # noqa: F401 (a fixture)

pytestmark = pytest.mark.anyio


@dataclass
class Engine:
    """Answers `/json` with Content-Length, `/stream` chunked (three pieces), `/cut` by
    dropping the connection mid-answer, `/endless` with one piece and then nothing until
    its client leaves, `/silent` not at all; records each request's client port and headers."""

    clients: list[int] = field(default_factory=list)
    left: asyncio.Event = field(default_factory=asyncio.Event)
    headers: list[dict[str, str]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.clients.append(scope["client"][1])
        self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        body = await request_body(receive)
        self.bodies.append(body)
        if scope["path"] == "/silent":  # never answers: waits for its client to leave
            while (await receive())["type"] != "http.disconnect":
                pass
            self.left.set()
            return
        if scope["path"] == "/json":
            payload = json.dumps({"echo": json.loads(body)}).encode()
            await send({"type": "http.response.start", "status": 201, "headers": []})
            await send({"type": "http.response.body", "body": payload})
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        if scope["path"] == "/endless":
            await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
            while (await receive())["type"] != "http.disconnect":
                pass
            self.left.set()
            return
        for piece in (b"data: 1\n\n", b"data: 2\n\n", b"data: 3\n\n"):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            if scope["path"] == "/cut":
                raise RuntimeError("the engine dies mid-answer")  # uvicorn drops the socket
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture
async def engine() -> AsyncIterator[tuple[Engine, str]]:
    app = Engine()
    listener = AsgiListener(app, "127.0.0.1")
    await listener.start()
    try:
        yield app, listener.url
    finally:
        await listener.stop()


@pytest.fixture
async def connections() -> AsyncIterator[EngineConnections]:
    pool = EngineConnections()
    try:
        yield pool
    finally:
        await pool.close()


async def test_a_content_length_answer_is_read_whole_with_its_status(
    engine: Any, connections: EngineConnections
) -> None:
    app, url = engine
    response = await connections.request(url, "/json", {"X-Request-Id": "r1"}, b'{"a": 1}')
    assert response.status == 201
    assert json.loads(await response.read()) == {"echo": {"a": 1}}
    assert app.headers[0]["x-request-id"] == "r1"
    assert app.headers[0]["host"] == url.removeprefix("http://")


async def test_a_chunked_answer_comes_piece_by_piece_then_ends(
    engine: Any, connections: EngineConnections
) -> None:
    _, url = engine
    response = await connections.request(url, "/stream", {}, b"{}")
    pieces = []
    while (piece := await response.next_piece()) is not None:
        pieces.append(piece)
    assert b"".join(pieces) == b"data: 1\n\ndata: 2\n\ndata: 3\n\n"


async def test_a_finished_answer_leaves_its_connection_for_the_next_request(
    engine: Any, connections: EngineConnections
) -> None:
    app, url = engine
    for path in ("/stream", "/json", "/stream"):
        await (await connections.request(url, path, {}, b"{}")).read()
    assert len(set(app.clients)) == 1


async def test_an_abandoned_answer_closes_its_connection(
    engine: Any, connections: EngineConnections
) -> None:
    app, url = engine
    response = await connections.request(url, "/endless", {}, b"{}")
    assert await response.next_piece() == b"data: 1\n\n"
    response.abandon()  # a client that left: the engine must see the disconnect
    await asyncio.wait_for(app.left.wait(), 5)
    await (await connections.request(url, "/json", {}, b"{}")).read()
    assert len(set(app.clients)) == 2


async def test_a_request_given_up_before_its_answer_closes_its_connection(
    engine: Any, connections: EngineConnections
) -> None:
    app, url = engine
    waiting = asyncio.ensure_future(connections.request(url, "/silent", {}, b"{}"))
    await asyncio.sleep(0.2)
    waiting.cancel()  # the first-token timeout, or a client gone
    await asyncio.wait_for(app.left.wait(), 5)  # vLLM would abort the request here


@contextlib.asynccontextmanager
async def scripted_engine(
    *writes: tuple[asyncio.Event | None, bytes],
) -> AsyncIterator[str]:
    """An engine that answers one request with these raw writes (chunked framing written
    out), each after its event is set: the test decides what each read of the socket holds."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n{}")
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for after, data in writes:
            if after is not None:
                await after.wait()
            writer.write(data)
            await writer.drain()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def test_pushed_pieces_come_from_the_read_buffered_ones_first(
    connections: EngineConnections,
) -> None:
    buffered, pushed = asyncio.Event(), asyncio.Event()
    writes = ((None, chunk(b"data: 1\n\n")), (buffered, chunk(b"data: 2\n\n")))
    end = ((pushed, chunk(b"data: 3\n\n") + b"0\r\n\r\n"),)
    async with scripted_engine(*writes, *end) as url:
        response = await connections.request(url, "/s", {}, b"{}")
        assert await response.next_piece() == b"data: 1\n\n"
        buffered.set()
        while not response._pieces:  # the second piece waits in the buffer
            await asyncio.sleep(0.01)
        pieces: list[bytes] = []
        ended: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
        response.push_to(pieces.append, ended.set_result)
        assert pieces == [b"data: 2\n\n"]  # at once, inside push_to
        pushed.set()
        assert await asyncio.wait_for(ended, 5) is None
        assert pieces == [b"data: 2\n\n", b"data: 3\n\n"]


async def test_the_chunks_one_read_brings_go_on_as_one_piece(
    connections: EngineConnections,
) -> None:
    # So the relay writes them to its client in one system call, as a byte proxy would.
    first_seen = asyncio.Event()
    late_read = chunk(b"data: 2\n\n") + chunk(b"data: 3\n\n") + b"0\r\n\r\n"
    async with scripted_engine((None, chunk(b"data: 1\n\n")), (first_seen, late_read)) as url:
        response = await connections.request(url, "/s", {}, b"{}")
        pieces: list[bytes] = []
        ended: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

        def on_piece(piece: bytes) -> None:
            pieces.append(piece)
            first_seen.set()

        response.push_to(on_piece, ended.set_result)
        assert await asyncio.wait_for(ended, 5) is None
        assert pieces == [b"data: 1\n\n", b"data: 2\n\ndata: 3\n\n"]


async def test_an_answer_cut_midway_fails_the_reader(
    engine: Any, connections: EngineConnections
) -> None:
    _, url = engine
    response = await connections.request(url, "/cut", {}, b"{}")
    with pytest.raises(EngineConnectionLost):
        await asyncio.wait_for(response.read(), 5)


async def test_a_pooled_connection_the_engine_closed_is_replaced_without_an_error(
    engine: Any,
    connections: EngineConnections,
) -> None:
    app, url = engine
    await (await connections.request(url, "/json", {}, b"{}")).read()
    (pooled,) = connections._idle[EngineAddress.of(url)]
    assert pooled.transport is not None
    pooled.transport.close()  # as an engine's keep-alive timeout would
    response = await connections.request(url, "/json", {}, b'{"b": 2}')
    assert json.loads(await response.read()) == {"echo": {"b": 2}}
    assert len(set(app.clients)) == 2


async def test_a_closed_port_is_unreachable() -> None:
    connections = EngineConnections(connect_timeout_s=1.0)
    with pytest.raises(EngineUnreachable, match=r"cannot connect to 127\.0\.0\.1:9"):
        await connections.request("http://127.0.0.1:9", "/v1/completions", {}, b"{}")


async def test_a_header_value_cannot_split_the_request(engine: Any) -> None:
    _, url = engine
    connections = EngineConnections()
    with pytest.raises(ValueError, match="line break"):
        await connections.request(url, "/json", {"X-Request-Id": "a\r\nEvil: 1"}, b"{}")
    assert not connections._all


def test_an_endpoint_url_is_plain_http_with_a_port() -> None:
    assert EngineAddress.of("http://10.0.0.2:8001") == EngineAddress("10.0.0.2", 8001)
    assert EngineAddress.of("http://[::1]:8001").host_header == "[::1]:8001"
    for bad in ("https://h:1", "http://h", "h:1"):
        with pytest.raises(ValueError, match="http://HOST:PORT"):
            EngineAddress.of(bad)
