"""What an engine replica's HTTP port answers, as the gateway reads it without decoding tokens.

vLLM's OpenAI app answers errors as `{"error": {...}}` with their status, or, once it has
answered 200, as an error event inside the stream; tokens come as whole or split SSE events.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class _ErrorDetail:
    message: str
    type: str | None
    param: str | None
    code: int


@dataclass(frozen=True)
class EngineHttpError:
    """A non-200 answer of the engine's app, shaped like vLLM's ErrorResponse (`.error`)."""

    error: _ErrorDetail


def engine_http_error(status: int | None, payload: bytes) -> EngineHttpError:
    """vLLM answers `{"error": {...}}` (or, in older versions, the fields at the top level).

    `status` None: an error event inside a 200 stream, whose only status is the body's own
    `code` (500 when that is missing or not an HTTP error status)."""
    try:
        body = json.loads(payload)
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    nested = body.get("error")
    detail: dict[str, Any] = nested if isinstance(nested, dict) else body
    if status is None:
        code = detail.get("code")
        status = code if isinstance(code, int) and 400 <= code < 600 else 500
    message = detail.get("message") or payload.decode("utf-8", "replace")[:500] or str(status)
    kind, param = detail.get("type"), detail.get("param")
    return EngineHttpError(
        _ErrorDetail(
            message=str(message),
            type=kind if isinstance(kind, str) else None,
            param=param if isinstance(param, str) else None,
            code=status,
        )
    )


ERROR_EVENT = b'data: {"error"'


def split_at_error_event(events: bytes) -> tuple[bytes, EngineHttpError | None]:
    """(the events before vLLM's in-stream error event, that error), or (events, None).

    vLLM answers 200 before generating, so an engine that dies (or a request it refuses once
    it has started) shows up as `data: {"error": {...}}` inside the stream. Turning it into an
    error item lets the gateway answer 503 + Retry-After when it comes first, before any byte
    went to the client, and count a stream error when it comes later.
    """
    if ERROR_EVENT not in events:  # the fast path: a token's text cannot hold it unescaped
        return events, None
    start = 0
    while start < len(events):
        end = events.find(b"\n\n", start)
        end = len(events) if end < 0 else end + 2
        event = events[start:end]
        if event.startswith(ERROR_EVENT):
            return events[:start], engine_http_error(None, event[len(b"data: ") :].strip())
        start = end
    return events, None


def complete_events(buffer: bytes) -> tuple[bytes, bytes]:
    """(whole SSE events, the incomplete rest): the gateway scans whole events only."""
    if buffer.endswith(b"\n\n"):  # the usual case: one read, whole events; no copy
        return buffer, b""
    end = buffer.rfind(b"\n\n")
    if end < 0:
        return b"", buffer
    return buffer[: end + 2], buffer[end + 2 :]
