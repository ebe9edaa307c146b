"""One streamed answer on its way through the gateway, chunk by chunk, and its record.

Per chunk the gateway does three things, whichever way the chunk travels: it records usage
(and drops the usage report the client did not ask for, `stream_usage.py`), notes the time
of each chunk that carries tokens (TTFT and inter-token latency), and turns an error into
the stream's closing error event. At the end the request is recorded once, with its outcome.

Two ways through:

- pulled: `chunks()` is an async generator that `RelayResponse` writes with the server's
  `send`; every backend's items (the handle's objects, the engine's bytes) can take it;
- pushed: `push(writer)` hands the engine connection a sink (`events`, `ended`) that writes
  each chunk to the client's socket from inside the read that brought it
  (`direct_stream.py`, `internals.py`). About half of the relay's CPU per chunk was
  the generators, tasks and ASGI messages the pulled way costs (BENCHMARKS.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from serve_apps.gateway.gateway_metrics import GatewayMetrics, RequestOutcome
from serve_apps.gateway.http_errors import model_server_error
from serve_apps.gateway.openai_errors import GatewayError
from serve_apps.gateway.request_timing import RequestTiming
from serve_apps.registry.routing_table import ModelRoute
from serve_apps.relay.direct_stream import DirectStream
from serve_apps.relay.engine_events import EngineHttpError
from serve_apps.relay.sse_encoding import sse_error, sse_text, token_events
from serve_apps.relay.stream_usage import USAGE_KEY, scan_chunk

log = logging.getLogger(__name__)


class ClientWriter(Protocol):
    """The client's socket, for body chunks (`internals.ChunkWriter`)."""

    def write(self, data: bytes) -> None: ...

    @property
    def paused(self) -> bool: ...

    async def drained(self) -> None: ...


class StreamRelay:
    def __init__(
        self,
        route: ModelRoute,
        first: Any,
        outputs: AsyncIterator[Any],
        *,
        timing: RequestTiming,
        release: Callable[[], None],
        metrics: GatewayMetrics,
        retry_after_s: int,
        failure: Callable[[ModelRoute, BaseException], GatewayError],
    ) -> None:
        self._route = route
        self._first = first
        self._outputs = outputs
        self._timing = timing
        self._usage = timing.usage
        self._strip = timing.strip_usage
        self._release = release
        self._metrics = metrics
        self._retry_after_s = retry_after_s
        self._failure = failure
        self._started = time.monotonic()
        self._outcome = RequestOutcome.CANCELLED
        self._finished = False
        self._writer: ClientWriter | None = None
        self._done: asyncio.Future[None] | None = None
        self._resuming: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ per chunk
    def _first_chunk(self) -> bytes:
        # The first chunk is the first token's (vLLM sends nothing before prefill ends); it
        # may hold more tokens, counted as every later chunk's are.
        data = scan_chunk(_as_bytes(self._first), self._usage, strip_usage=self._strip)
        self._timing.chunk(max(1, token_events(data)))
        return data

    def _engine_bytes(self, data: bytes) -> bytes:
        """The per-token case: substring scans and a count of token events, no parse."""
        if USAGE_KEY in data:  # about one chunk per request
            data = scan_chunk(data, self._usage, strip_usage=self._strip)
        tokens = token_events(data)
        if tokens:
            self._timing.chunk(tokens)
        return data

    def _error_event(self, item: Any) -> bytes | None:
        """The closing error event when `item` is an error the stream must end with."""
        error = model_server_error(item, self._retry_after_s)
        if error is None:
            return None
        self._outcome = RequestOutcome.STREAM_ERROR
        return sse_error(error).encode()

    def _broken(self, exc: BaseException) -> bytes:
        # Headers are sent; the only honest signal left is an error event in the stream.
        log.warning(
            "request %s: stream from %s broke after %.1f s: %s",
            self._timing.request_id,
            self._route.name,
            time.monotonic() - self._started,
            exc,
        )
        self._outcome = RequestOutcome.STREAM_ERROR
        return sse_error(self._failure(self._route, exc)).encode()

    def finish(self) -> None:
        """The request is over (whatever the reason): counted once, in-flight released."""
        if self._finished:
            return
        self._finished = True
        self._release()
        if self._resuming is not None:
            self._resuming.cancel()
        # The status line (200) went out with the first chunk, whatever happened after.
        self._metrics.request_finished(self._timing.record(self._outcome, 200))

    # ------------------------------------------------------------ pulled
    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            yield self._first_chunk()
            async for item in self._outputs:
                if type(item) is not bytes:  # the handle path's objects, or an error
                    error_event = self._error_event(item)
                    if error_event is not None:
                        yield error_event
                        return
                    item = _as_bytes(item)
                chunk = self._engine_bytes(item)
                if chunk:
                    yield chunk
            self._outcome = RequestOutcome.OK
        except Exception as exc:
            yield self._broken(exc)
        finally:
            aclose = getattr(self._outputs, "aclose", None)
            if aclose is not None:
                await aclose()
            self.finish()

    # ------------------------------------------------------------ pushed
    def push(self, writer: ClientWriter) -> asyncio.Future[None] | None:
        """Relay the rest through `writer` from the engine connection's reads; the future
        is done when the stream is. None: this answer can only be pulled."""
        outputs = self._outputs
        if not isinstance(outputs, DirectStream) or not outputs.can_push:
            return None
        self._writer = writer
        self._done = asyncio.get_running_loop().create_future()
        writer.write(self._first_chunk())
        outputs.push_to(self)
        return self._done

    def stop(self) -> None:
        """The client left (or the gateway is stopping) before the stream ended."""
        if isinstance(self._outputs, DirectStream):
            self._outputs.abandon()
        self.finish()

    def events(self, data: bytes) -> None:  # EventSink
        writer = self._writer
        assert writer is not None
        chunk = self._engine_bytes(data)
        if chunk:
            writer.write(chunk)
            if writer.paused and self._resuming is None:
                # Hold the engine's connection until the client has read what it has.
                assert isinstance(self._outputs, DirectStream)
                self._outputs.pause()
                self._resuming = asyncio.get_running_loop().create_task(self._resume(writer))

    async def _resume(self, writer: ClientWriter) -> None:
        await writer.drained()
        self._resuming = None
        assert isinstance(self._outputs, DirectStream)
        self._outputs.resume()

    def ended(self, error: BaseException | EngineHttpError | None) -> None:  # EventSink
        writer = self._writer
        assert writer is not None and self._done is not None
        if error is None:
            self._outcome = RequestOutcome.OK
        elif isinstance(error, EngineHttpError):
            writer.write(self._error_event(error) or b"")
        else:
            writer.write(self._broken(error))
        self.finish()
        if not self._done.done():
            self._done.set_result(None)


def _as_bytes(item: Any) -> bytes:
    """The engine's bytes as they are; the handle path's objects and text as SSE bytes."""
    return item if type(item) is bytes else sse_text(item).encode("utf-8")
