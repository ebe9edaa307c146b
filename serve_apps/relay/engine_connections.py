"""Keep-alive HTTP/1.1 connections from the gateway to engine replicas' own ports.

The relay's cost is per chunk, one per token, so the body of a streamed answer is never
queued for a task to pick up: `httptools` (the C parser uvicorn uses) hands each piece to a
callback inside the event loop's read, and once the relay has attached its sink
(`EngineResponse.push_to`) the piece is scanned and written to the client there, with no
task switch, future or generator frame in between. Before that (and for short answers) the
pieces wait in a buffer for `next_piece()`.

Only what talking to our own engine ports needs: requests with a body, answers framed by
Content-Length or chunked, keep-alive reuse, back-pressure. A client that leaves closes the
engine connection, which is how vLLM learns to abort the request.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

import httptools

OnPiece = Callable[[bytes], None]
OnEnd = Callable[["BaseException | None"], None]


class EngineUnreachable(ConnectionError):
    """The engine's port refused, timed out or closed before answering: nothing reached the
    engine, so the request may go another way."""


class EngineConnectionLost(ConnectionError):
    """The engine's connection closed in the middle of an answer."""


@dataclass(frozen=True)
class EngineAddress:
    host: str
    port: int

    @classmethod
    def of(cls, url: str) -> EngineAddress:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or parts.port is None:
            raise ValueError(f"an engine endpoint is http://HOST:PORT, not {url!r}")
        return cls(parts.hostname, parts.port)

    @property
    def host_header(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


class EngineResponse:
    """One answer: status and headers first, then the body pulled (`next_piece`, `read`) or
    pushed (`push_to`)."""

    def __init__(self, connection: _EngineProtocol) -> None:
        self._connection = connection
        self.status = 0
        self.keep_alive = False
        self.complete = False
        self._pieces: deque[bytes] = deque()
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._on_piece: OnPiece | None = None
        self._on_end: OnEnd | None = None

    # ------------------------------------------------------------ the consumer's side
    async def next_piece(self) -> bytes | None:
        """The next piece of the body as it came; None at its end."""
        while not self._pieces:
            if self._error is not None:
                raise self._error
            if self.complete:
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._pieces.popleft()

    async def read(self) -> bytes:
        pieces = []
        while (piece := await self.next_piece()) is not None:
            pieces.append(piece)
        return b"".join(pieces)

    def push_to(self, on_piece: OnPiece, on_end: OnEnd) -> None:
        """From now on, call `on_piece` with each piece as it arrives (those already buffered
        first, at once) and `on_end` once: None after the last piece, else the failure."""
        self._on_piece, self._on_end = on_piece, on_end
        while self._pieces:
            on_piece(self._pieces.popleft())
        if self._error is not None or self.complete:
            self._finish()

    def pause(self) -> None:
        """Stop reading from the engine (the client's side is full)."""
        self._connection.pause_reading()

    def resume(self) -> None:
        self._connection.resume_reading()

    def abandon(self) -> None:
        """Stop here: close the connection (vLLM aborts a request whose client left)."""
        if not self.complete:
            self._connection.close()

    # ------------------------------------------------------------ the connection's side
    def _piece(self, piece: bytes) -> None:
        if self._on_piece is not None:
            self._on_piece(piece)
            return
        self._pieces.append(piece)
        self._wake()

    def _complete(self) -> None:
        self.complete = True
        self._finish()

    def _fail(self, error: BaseException) -> None:
        if not self.complete and self._error is None:
            self._error = error
            self._finish()

    def _finish(self) -> None:
        if self._on_end is not None:
            on_end, self._on_end = self._on_end, None
            self._on_piece = None
            on_end(None if self.complete else self._error)
        else:
            self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class _EngineProtocol(asyncio.Protocol):
    """One connection; httptools calls the `on_*` methods while parsing."""

    def __init__(self, address: EngineAddress, pool: EngineConnections) -> None:
        self.address = address
        self._pool = pool
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.response: EngineResponse | None = None
        self.headers_done: asyncio.Future[None] | None = None
        self.received = False
        self.lost = False
        self.idle_since = 0.0
        self._held: list[bytes] = []

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports (Ray's workers run on uvloop) are not asyncio.Transport's
        # subclasses, though they have its methods.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._pass_held()
            self._failed(EngineConnectionLost(f"the engine's answer is not HTTP: {exc}"))
            self.close()
            return
        self._pass_held()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._pool._forget(self)
        self._failed(EngineConnectionLost("the engine closed the connection mid-answer"))

    # httptools (no `on_header`: the relay needs the status and framing only, which the
    # parser tracks itself)
    def on_headers_complete(self) -> None:
        if self.response is None:
            return
        self.response.status = self._parser.get_status_code()
        self.response.keep_alive = self._parser.should_keep_alive()
        if self.headers_done is not None and not self.headers_done.done():
            self.headers_done.set_result(None)

    def on_body(self, body: bytes) -> None:
        # One read often holds several chunks of the answer (several tokens, when the loop
        # got to this socket late): they go on as one piece, so the relay writes them to the
        # client in one system call, as a byte-level proxy would.
        # Joined once at the read's end: a late read can hold hundreds of chunks, and
        # concatenating them one by one would copy the read quadratically.
        self._held.append(body)

    def _pass_held(self) -> None:
        held = self._held
        if held:
            piece = held[0] if len(held) == 1 else b"".join(held)
            held.clear()
            if self.response is not None:
                self.response._piece(piece)

    def on_message_complete(self) -> None:
        self._pass_held()
        response, self.response = self.response, None
        if response is None:
            return
        response._complete()
        if response.keep_alive and not self.lost:
            self._pool._release(self)
        else:
            self.close()

    # the pool's
    def send(self, request: bytes) -> EngineResponse:
        assert self.transport is not None
        self.response = EngineResponse(self)
        self.headers_done = asyncio.get_running_loop().create_future()
        self.received = False
        self.transport.write(request)
        return self.response

    def pause_reading(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        self.lost = True

    def _failed(self, error: BaseException) -> None:
        if self.headers_done is not None and not self.headers_done.done():
            self.headers_done.set_exception(error)
            self.headers_done.exception()  # retrieved: the waiter may be gone
        if self.response is not None:
            self.response._fail(error)
            self.response = None


class EngineConnections:
    """Requests to engine ports over pooled keep-alive connections."""

    def __init__(self, *, connect_timeout_s: float = 2.0, idle_timeout_s: float = 60.0) -> None:
        self._connect_timeout_s = connect_timeout_s
        # Below the engine side's keep-alive (300 s), so a pooled connection is never one
        # the server is about to close.
        self._idle_timeout_s = idle_timeout_s
        self._idle: dict[EngineAddress, list[_EngineProtocol]] = {}
        self._all: set[_EngineProtocol] = set()
        self._addresses: dict[str, EngineAddress] = {}  # parsed once per endpoint URL

    async def request(
        self, url: str, path: str, headers: dict[str, str], body: bytes
    ) -> EngineResponse:
        """POST `body` to `url` + `path`; returns once the status and headers are in.

        Raises `EngineUnreachable` when nothing reached the engine."""
        address = self._addresses.get(url)
        if address is None:
            address = self._addresses[url] = EngineAddress.of(url)
        request = _request_bytes(address, path, headers, body)
        connection = self._pooled(address)
        if connection is not None:
            try:
                return await self._exchange(connection, request)
            except EngineConnectionLost:
                # The engine closed an idle connection as we reused it: it saw nothing (a
                # request it had begun would have had an answer started); once more, fresh.
                if connection.received:
                    raise
        return await self._exchange(await self._connect(address), request)

    async def _exchange(self, connection: _EngineProtocol, request: bytes) -> EngineResponse:
        response = connection.send(request)
        assert connection.headers_done is not None
        try:
            await connection.headers_done
        except BaseException:
            # Cancelled (the first-token timeout, a client gone) or failed: the engine must
            # not go on generating for nobody, and the connection is in no state to reuse.
            connection.close()
            raise
        return response

    def _pooled(self, address: EngineAddress) -> _EngineProtocol | None:
        idle = self._idle.get(address)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if not connection.lost and now - connection.idle_since < self._idle_timeout_s:
                return connection
            connection.close()
            self._all.discard(connection)
        return None

    async def _connect(self, address: EngineAddress) -> _EngineProtocol:
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _EngineProtocol(address, self), address.host, address.port
                ),
                self._connect_timeout_s,
            )
        except (OSError, TimeoutError) as exc:
            raise EngineUnreachable(
                f"cannot connect to {address.host_header}: {exc or type(exc).__name__}"
            ) from exc
        self._all.add(protocol)
        return protocol

    def _release(self, connection: _EngineProtocol) -> None:
        connection.idle_since = time.monotonic()
        self._idle.setdefault(connection.address, []).append(connection)

    def _forget(self, connection: _EngineProtocol) -> None:
        self._all.discard(connection)
        idle = self._idle.get(connection.address)
        if idle and connection in idle:
            idle.remove(connection)

    async def close(self) -> None:
        for connection in list(self._all):
            connection.close()
        self._all.clear()
        self._idle.clear()


def _request_bytes(
    address: EngineAddress, path: str, headers: dict[str, str], body: bytes
) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: {address.host_header}"]
    for name, value in headers.items():
        if "\r" in value or "\n" in value:  # never a header split by a value
            raise ValueError(f"header {name} holds a line break")
        lines.append(f"{name}: {value}")
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
