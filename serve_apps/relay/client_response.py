"""A streamed answer written with as little work per chunk as the server allows.

The relay's cost is per chunk (one per token), so every layer a chunk crosses counts. The
status line and headers go through the wrapped `send` (so every wrapper sees the response
start: the guard adds `X-Request-Id`). The body then goes one of two
ways:

- pushed, when the answer comes from an engine's port and the server is uvicorn's httptools
  one (`internals.chunk_writer`): the engine connection writes each chunk to the
  client's socket from inside the read that brought it (`relay/streamed_answer.py`); only the end of
  the response goes back through the server's `send`;
- pulled otherwise (the Serve handle's answers, another server, a test client): chunks from
  an async generator, each written with the server's own `send`, which `keep_server_send`
  leaves in the ASGI scope, past the middleware wrappers that act only on the first message.

The relay-capacity benchmark suite (`python -m benchmarks run relay-capacity`) measures the
difference.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Protocol

from starlette.responses import Response

from serve_apps.gateway.guard import ASGIApp, Receive, Scope, Send
from serve_apps.internals import ChunkWriter, chunk_writer

SERVER_SEND = "switchyard.server_send"
"""Scope key of the ASGI server's own `send`, under every middleware's wrapper."""

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    # Proxies in front (nginx) must not buffer a token stream.
    (b"x-accel-buffering", b"no"),
    (b"cache-control", b"no-cache"),
]


def keep_server_send(app: ASGIApp) -> ASGIApp:
    """`app` with the server's `send` kept in each HTTP request's scope (`SERVER_SEND`)."""

    async def app_keeping_send(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[SERVER_SEND] = send
        await app(scope, receive, send)

    return app_keeping_send


class RelaySource(Protocol):
    """A streamed answer (`streamed_answer.StreamRelay`): pulled as chunks, or pushed."""

    def chunks(self) -> AsyncIterator[bytes]: ...

    def push(self, writer: ChunkWriter) -> asyncio.Future[None] | None:
        """Write the stream through `writer`; done when the stream is. None: pull it."""

    def stop(self) -> None:
        """The client left before the stream ended."""


class RelayResponse(Response):
    """An SSE answer from `source` (bytes, already framed as events).

    A Starlette `Response` (FastAPI passes those through unserialised), built as
    `StreamingResponse` is, without `Response.__init__`'s content-length.

    A client that goes away ends the stream (the engine's request is aborted when the
    backend's connection closes), as Starlette's streaming response does for servers older
    than ASGI 2.4, uvicorn included.
    """

    def __init__(self, source: RelaySource) -> None:
        self._source = source
        self.status_code = 200
        self.media_type = "text/event-stream"
        self.background = None
        self.raw_headers = list(_SSE_HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        try:
            await send(start)
        except BaseException:
            self._source.stop()
            raise
        body_send: Send = scope.get(SERVER_SEND, send)
        writer = chunk_writer(body_send)
        pushed = None if writer is None else self._source.push(writer)
        loop = asyncio.get_running_loop()
        stream = pushed if pushed is not None else loop.create_task(self._stream(body_send))
        gone = loop.create_task(_disconnected(receive))
        try:
            await asyncio.wait((stream, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not stream.done():
                self._source.stop()
                stream.cancel()
            gone.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stream
            with contextlib.suppress(asyncio.CancelledError):
                await gone
        if stream.cancelled():  # the client left: nothing more to say
            return
        stream.result()
        if pushed is not None:
            await body_send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _stream(self, send: Send) -> None:
        chunks = self._source.chunks()
        try:
            async for chunk in chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
