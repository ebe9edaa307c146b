"""The relay's response: headers through every middleware, body chunks straight to the server,
and a client that leaves ends the stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import pytest

from serve_apps.relay.client_response import SERVER_SEND, RelayResponse, keep_server_send

Message = MutableMapping[str, Any]

pytestmark = pytest.mark.anyio


async def _chunks(events: list[bytes], finished: list[str]) -> AsyncIterator[bytes]:
    try:
        for event in events:
            yield event
            await asyncio.sleep(0)
    finally:
        finished.append("closed")


class _PulledSource:
    """A stream that can only be pulled (as the handle path's are)."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks
        self.stopped = False

    def chunks(self) -> AsyncIterator[bytes]:
        return self._chunks

    def push(self, writer: Any) -> None:
        return None

    def stop(self) -> None:
        self.stopped = True


async def _quiet_receive() -> Message:
    await asyncio.Event().wait()  # the client stays
    return {"type": "http.disconnect"}


async def test_headers_go_through_the_middlewares_and_chunks_straight_to_the_server() -> None:
    server: list[Message] = []
    wrapped: list[Message] = []

    async def server_send(message: Message) -> None:
        server.append(message)

    async def middleware_send(message: Message) -> None:
        wrapped.append(message)
        await server_send(message)

    finished: list[str] = []
    response = RelayResponse(_PulledSource(_chunks([b"data: 1\n\n", b"data: 2\n\n"], finished)))
    scope: dict[str, Any] = {"type": "http"}
    await keep_server_send(lambda s, r, send: response(s, r, middleware_send))(
        scope, _quiet_receive, server_send
    )
    assert scope[SERVER_SEND] is server_send
    assert [m["type"] for m in wrapped] == ["http.response.start"]
    assert (b"content-type", b"text/event-stream; charset=utf-8") in wrapped[0]["headers"]
    assert [m.get("body") for m in server[1:]] == [b"data: 1\n\n", b"data: 2\n\n", b""]
    assert server[-1]["more_body"] is False
    assert finished == ["closed"]


async def test_a_client_that_leaves_cancels_the_stream_and_closes_its_source() -> None:
    sent: list[Message] = []
    left = asyncio.Event()

    async def send(message: Message) -> None:
        sent.append(message)
        if len(sent) == 3:
            left.set()  # the client goes away after two chunks

    async def receive() -> Message:
        await left.wait()
        return {"type": "http.disconnect"}

    finished: list[str] = []
    endless = [b"data: x\n\n"] * 10_000
    source = _PulledSource(_chunks(endless, finished))
    await asyncio.wait_for(RelayResponse(source)({}, receive, send), 5)
    assert finished == ["closed"]
    assert source.stopped
    assert len(sent) < 100
    assert not any(m.get("more_body") is False for m in sent)
