"""Token usage in an OpenAI server-sent-event stream, and hiding what the client didn't ask for.

The gateway asks every streaming request's engine for a final usage report
(`stream_options.include_usage`) so token counters are exact; when the client did not ask
for it, that usage-only event (empty `choices`) is removed before it reaches the client.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_DATA = "data: "
# Only an event whose usage is an object is parsed: with include_usage, vLLM may also put
# `"usage": null` in every token chunk, and parsing each of those would cost the gateway a
# JSON decode per token.
_USAGE_OBJECT = re.compile(r'"usage":\s*\{')
USAGE_KEY = b'"usage":'
"""In every chunk that reports usage; a token's text cannot hold it unescaped."""


@dataclass
class Usage:
    prompt_tokens: int | None = None
    generated_tokens: int | None = None

    def take(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        # Chat and completions say prompt/completion_tokens; the Responses API says
        # input/output_tokens.
        prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
        generated = usage.get("completion_tokens", usage.get("output_tokens"))
        if isinstance(prompt, int):
            self.prompt_tokens = prompt
        if isinstance(generated, int):
            self.generated_tokens = generated


def request_usage(body: dict[str, Any]) -> bool:
    """Make a streaming request report usage at its end; True if the client asked itself.

    A `stream_options` that is not an object is left alone, for validation to refuse."""
    options = body.get("stream_options")
    if options is None:
        options = {}
    if not isinstance(options, dict):
        return True
    if options.get("include_usage"):
        return True
    body["stream_options"] = {**options, "include_usage": True}
    return False


def scan_events(text: str, usage: Usage, *, strip_usage: bool) -> str:
    """Record usage found in `text` (one or more SSE events); drop usage-only events if
    `strip_usage`. Events without a usage report pass through untouched."""
    if _USAGE_OBJECT.search(text) is None:
        return text
    kept: list[str] = []
    for event in text.split("\n\n"):
        if not event:
            continue
        data = _data_of(event)
        if data is not None and _USAGE_OBJECT.search(data):
            try:
                payload = json.loads(data)
            except ValueError:
                payload = None
            if isinstance(payload, dict) and payload.get("usage"):
                usage.take(payload["usage"])
                if strip_usage and not payload.get("choices"):
                    continue
            elif isinstance(payload, dict) and isinstance(payload.get("response"), dict):
                # The Responses API's `response.completed` event nests its usage.
                usage.take(payload["response"].get("usage"))
        kept.append(event + "\n\n")
    return "".join(kept)


def scan_chunk(chunk: bytes, usage: Usage, *, strip_usage: bool) -> bytes:
    """`scan_events` on the bytes the engine sent: a chunk without a usage key (all but
    about one per request) is returned as it is, after one substring search."""
    if USAGE_KEY not in chunk:
        return chunk
    text = chunk.decode("utf-8", "replace")
    scanned = scan_events(text, usage, strip_usage=strip_usage)
    return chunk if scanned is text else scanned.encode("utf-8")


def _data_of(event: str) -> str | None:
    """The `data:` field of one SSE event; the Responses API's events start with an
    `event:` line."""
    if event.startswith(_DATA):
        return event[len(_DATA) :]
    at = event.find("\n" + _DATA)
    return None if at < 0 else event[at + 1 + len(_DATA) :]
