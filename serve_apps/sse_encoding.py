"""Model-server outputs as OpenAI server-sent-event text."""

from __future__ import annotations

import json
from typing import Any

from serve_apps.openai_errors import GatewayError


def as_json(item: Any) -> Any:
    """A pydantic response object as plain JSON values; anything else unchanged."""
    if hasattr(item, "model_dump"):
        return item.model_dump(mode="json")
    return item


def sse_text(item: Any) -> str:
    """A streamed item as SSE text: the handle path yields lists of event strings, the
    direct path whole event strings, and a response object becomes one `data:` event."""
    if isinstance(item, list):
        return "".join(sse_text(part) for part in item)
    if isinstance(item, str):
        return item
    return f"data: {json.dumps(as_json(item))}\n\n"


def has_content(text: str) -> bool:
    """A chunk that carries tokens (not only `[DONE]` or a usage report); the Responses
    API's token events are `response.*.delta` events."""
    return '"choices":[{' in text or '"choices": [{' in text or '.delta"' in text


def chunk_has_content(chunk: bytes) -> bool:
    """`has_content` of a chunk of the engine's bytes. Written out, not `any()` over a
    tuple: it runs once per token, and vLLM's compact form is the first test."""
    return b'"choices":[{' in chunk or b'"choices": [{' in chunk or b'.delta"' in chunk


def sse_error(error: GatewayError) -> str:
    """The error event that ends a stream whose 200 status line already went out."""
    return f"data: {json.dumps(error.body())}\n\ndata: [DONE]\n\n"
