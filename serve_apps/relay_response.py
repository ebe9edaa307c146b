"""A streamed answer written with as little work per chunk as the server allows.

The relay's cost is per chunk (one per token), so every layer a chunk crosses counts: with
Starlette's `StreamingResponse` each body chunk went through five `send` wrappers (Starlette's
error and exception middlewares, twice FastAPI's, the guard's request-id header) that only
act on the response's first message, was encoded from text, and a task group watched for the
client's disconnect. `RelayResponse` sends the status line and headers through the wrapped
`send` (so those layers see the response start, and the guard adds `X-Request-Id`), then the
engine's bytes, unchanged, with the server's own `send`, which `keep_server_send` leaves in
the ASGI scope. `benchmarks/relay_capacity.py` measures the difference.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.responses import Response

from serve_apps.gateway_guard import ASGIApp, Receive, Scope, Send

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


class RelayResponse(Response):
    """An SSE answer from `chunks` (bytes, already framed as events).

    A Starlette `Response` (FastAPI passes those through unserialised), built as
    `StreamingResponse` is, without `Response.__init__`'s content-length.

    A client that goes away cancels the stream (its generator's `finally` runs and the
    engine's request is aborted when the backend's connection closes), as Starlette's
    streaming response does for servers older than ASGI 2.4, uvicorn included.
    """

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks
        self.status_code = 200
        self.media_type = "text/event-stream"
        self.background = None
        self.raw_headers = list(_SSE_HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        await send(start)
        body_send: Send = scope.get(SERVER_SEND, send)
        loop = asyncio.get_running_loop()
        stream = loop.create_task(self._stream(body_send))
        gone = loop.create_task(_disconnected(receive))
        try:
            await asyncio.wait((stream, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not stream.done():
                stream.cancel()
            gone.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stream
            with contextlib.suppress(asyncio.CancelledError):
                await gone
        if not stream.cancelled():  # cancelled: the client left, nothing more to say
            stream.result()

    async def _stream(self, send: Send) -> None:
        try:
            async for chunk in self._chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            aclose = getattr(self._chunks, "aclose", None)
            if aclose is not None:
                await aclose()
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
