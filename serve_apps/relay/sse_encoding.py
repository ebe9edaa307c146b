"""Model-server outputs as OpenAI server-sent-event text."""

from __future__ import annotations

import json
from typing import Any

from serve_apps.gateway.openai_errors import GatewayError


def as_json(item: Any) -> Any:
    """A pydantic response object as plain JSON values; anything else unchanged."""
    if hasattr(item, "model_dump"):
        return item.model_dump(mode="json")
    return item


def sse_text(item: Any) -> str:
    """A handle-path item as SSE text: lists of event strings, event strings, or a response
    object, which becomes one `data:` event. (The direct path's items are the engine's
    bytes and skip this: `forwarder._sse_bytes`.)"""
    if isinstance(item, list):
        return "".join(sse_text(part) for part in item)
    if isinstance(item, str):
        return item
    return f"data: {json.dumps(as_json(item))}\n\n"


def token_events(chunk: bytes) -> int:
    """How many events of the engine's bytes carry tokens (not only `[DONE]` or a usage
    report); the Responses API's token events are `response.*.delta` events. One piece may
    hold several when the gateway read a stream late. Written out, not a loop over a tuple:
    it runs once per piece, and vLLM's compact form goes first."""
    compact = chunk.count(b'"choices":[{')
    if compact:
        return compact
    return chunk.count(b'"choices": [{') + chunk.count(b'.delta"')


def sse_error(error: GatewayError) -> str:
    """The error event that ends a stream whose 200 status line already went out."""
    return f"data: {json.dumps(error.body())}\n\ndata: [DONE]\n\n"
