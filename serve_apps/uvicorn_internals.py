"""The one place the gateway reaches under uvicorn's ASGI interface (its private classes).

A relayed token is one HTTP chunk. Through ASGI each costs a message dict, an awaited `send`
and its flow-control checks; `ChunkWriter` frames the chunk as uvicorn's own `send` does
(`httptools_impl.RequestResponseCycle.send`: `%x CRLF body CRLF`) and writes it to the
client's transport from inside the engine connection's read. The response's start and end
still go through `send`, so uvicorn's state (keep-alive, completion) stays its own.

Anything else (the h11 implementation, HTTP/1.0 without chunking, another ASGI server, a
test client) gets None, and the relay falls back to `send`.
"""

from __future__ import annotations

from typing import Any

from serve_apps.gateway_guard import Send


class ChunkWriter:
    """Writes body chunks of a started, chunked uvicorn response straight to its socket."""

    def __init__(self, cycle: Any) -> None:
        self._cycle = cycle
        self._transport = cycle.transport
        self._flow = cycle.flow

    def write(self, data: bytes) -> None:
        if self._cycle.disconnected or self._transport.is_closing():
            return  # the client left; the relay hears it from `receive`
        self._transport.write(b"%x\r\n%b\r\n" % (len(data), data))

    @property
    def paused(self) -> bool:
        """The client reads slower than the engine writes: the socket's buffer is full."""
        return bool(self._flow.write_paused) and not self._cycle.disconnected

    async def drained(self) -> None:
        await self._flow.drain()


def chunk_writer(send: Send) -> ChunkWriter | None:
    """A `ChunkWriter` for the response `send` belongs to, if uvicorn's httptools server
    sends it chunked and has sent its headers; else None."""
    cycle = getattr(send, "__self__", None)
    if cycle is None:
        return None
    try:
        from uvicorn.protocols.http.httptools_impl import RequestResponseCycle
    except ImportError:  # uvicorn without httptools
        return None
    if type(cycle) is not RequestResponseCycle:
        return None
    if not cycle.response_started or cycle.response_complete or cycle.chunked_encoding is not True:
        return None
    if cycle.scope.get("method") == "HEAD":
        return None
    return ChunkWriter(cycle)
