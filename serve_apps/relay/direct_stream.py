"""One answer from an engine replica's own port, as the gateway's relay takes it.

Pulled (`async for`), it yields the engine's bytes in whole SSE events, an `EngineHttpError`
for an error answer or an in-stream error event, or the JSON of a short answer; when the
port refused the connection it yields the Serve handle's items instead (nothing had reached
the engine, so that is safe).

Pushed (`push_to`), each run of whole events goes to an `EventSink` from inside the read
that brought it (`relay/engine_connections.py`): the per-token path of a stream once its first
token is out, with no task switch per chunk.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from serve_apps.relay.engine_connections import EngineResponse, EngineUnreachable
from serve_apps.relay.engine_events import (
    ERROR_EVENT,
    EngineHttpError,
    complete_events,
    engine_http_error,
    split_at_error_event,
)


class EventSink(Protocol):
    def events(self, data: bytes) -> None:
        """Whole SSE events, the engine's bytes."""

    def ended(self, error: BaseException | EngineHttpError | None) -> None:
        """Called once, last: None after the engine's last event, the `EngineHttpError` of
        an in-stream error event, or why the connection broke."""


class EndpointUse(Protocol):
    """What the backend keeps per endpoint (load, failures, counts)."""

    def sent(self) -> None: ...

    def unreachable(self, error: EngineUnreachable) -> None: ...

    def engine_error(self, error: EngineHttpError) -> None: ...

    def done(self) -> None:
        """The request no longer occupies the endpoint (called once)."""


class DirectStream:
    """See the module's text. Not reusable: one request, one answer."""

    def __init__(
        self,
        request: Callable[[], Awaitable[EngineResponse]],
        *,
        streaming: bool,
        fallback: Callable[[], AsyncIterator[Any]],
        use: EndpointUse,
    ) -> None:
        self._request = request
        self._streaming = streaming
        self._fallback = fallback
        self._use = use
        self._response: EngineResponse | None = None
        self._fallback_items: AsyncIterator[Any] | None = None
        self._outputs: deque[Any] = deque()
        self._pending = b""
        self._closed = False
        self._released = False
        self._sink: EventSink | None = None
        self._sink_ended = False

    def __aiter__(self) -> DirectStream:
        return self

    async def __anext__(self) -> Any:
        if self._fallback_items is not None:
            return await anext(self._fallback_items)
        if self._response is None and not self._closed:
            first = await self._open()
            if first is not None:
                return first
            if self._fallback_items is not None:
                return await anext(self._fallback_items)
        while not self._outputs:
            if self._closed:
                raise StopAsyncIteration
            assert self._response is not None
            try:
                piece = await self._response.next_piece()
            except BaseException:
                self.abandon()
                raise
            if piece is None:
                self._end_of_body()
            else:
                self._take(piece, self._outputs.append)
        return self._outputs.popleft()

    async def _open(self) -> Any:
        """Sends the request; the answer's one item when it is not a stream."""
        try:
            self._response = response = await self._request()
        except EngineUnreachable as exc:
            self._release()
            self._use.unreachable(exc)
            self._fallback_items = aiter(self._fallback())
            return None
        except BaseException:
            self._closed = True
            self._release()
            raise
        self._use.sent()
        if response.status == 200 and self._streaming:
            return None
        try:
            payload = await response.read()
        finally:
            self._closed = True
            self._release()
        if response.status != 200:
            error = engine_http_error(response.status, payload)
            self._use.engine_error(error)
            return error
        return json.loads(payload)

    # ------------------------------------------------------------ pushed
    @property
    def can_push(self) -> bool:
        """A stream's answer, begun and not taken over by the handle."""
        return self._response is not None and self._fallback_items is None and self._sink is None

    def push_to(self, sink: EventSink) -> None:
        """What is left of the stream goes to `sink`; what was already read goes first."""
        assert self._response is not None and self.can_push
        self._sink = sink
        while self._outputs:
            self._deliver(self._outputs.popleft())
        if self._closed:
            self._end_sink(None)
            return
        self._response.push_to(self._pushed, self._pushed_end)

    def pause(self) -> None:
        if self._response is not None:
            self._response.pause()

    def resume(self) -> None:
        if self._response is not None:
            self._response.resume()

    def _pushed(self, piece: bytes) -> None:
        if self._closed:
            return
        sink = self._sink
        whole = not self._pending and piece.endswith(b"\n\n")
        if sink is not None and whole and ERROR_EVENT not in piece:
            sink.events(piece)  # the per-token case: whole events, passed on as they are
            return
        self._take(piece, self._deliver)

    def _pushed_end(self, error: BaseException | None) -> None:
        if self._closed:
            return
        if error is None:
            self._end_of_body()
            while self._outputs:
                self._deliver(self._outputs.popleft())
        else:
            self.abandon()
        self._end_sink(error)

    def _deliver(self, item: bytes | EngineHttpError) -> None:
        assert self._sink is not None
        if isinstance(item, bytes):
            self._sink.events(item)
        else:
            self._end_sink(item)

    def _end_sink(self, error: BaseException | EngineHttpError | None) -> None:
        if self._sink is not None and not self._sink_ended:
            self._sink_ended = True
            self._sink.ended(error)

    # ------------------------------------------------------------ both
    def _take(self, piece: bytes, out: Callable[[Any], None]) -> None:
        events, self._pending = complete_events(self._pending + piece if self._pending else piece)
        if ERROR_EVENT in events:
            events, error = split_at_error_event(events)
            if events:
                out(events)
            if error is not None:
                # vLLM follows its error event with [DONE]; the request is over.
                self._use.engine_error(error)
                self.abandon()
                out(error)
        elif events:
            out(events)

    def _end_of_body(self) -> None:
        if self._pending.strip():
            self._outputs.append(self._pending)
        self._pending = b""
        self._closed = True
        self._release()

    def abandon(self) -> None:
        """No more of this answer: a client that left, or an error that ended it."""
        self._closed = True
        if self._response is not None:
            self._response.abandon()
        self._release()

    async def aclose(self) -> None:
        if self._fallback_items is not None:
            aclose = getattr(self._fallback_items, "aclose", None)
            if aclose is not None:
                await aclose()
        self.abandon()

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self._use.done()
