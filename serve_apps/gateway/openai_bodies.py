"""Non-streaming bodies made to match OpenAI's published OpenAPI document.

vLLM's response models serialize every optional field, so its bodies carry `null` where
OpenAI's schema has an optional array or object (`message.annotations`,
`message.function_call`, `usage.*_details`, a Response's `text` and `user`, a reasoning item's
`status`), leave out required nullable fields (a Response's `error`, chat logprobs'
`refusal`), and send `logprobs: null` in output text the schema says is an
array. The official Python client accepts that; typed clients generated from the spec
(the Go and Java SDKs, openapi-generator) refuse it. The gateway rewrites those places
only, in place, on the one body a non-streaming request returns; token chunks pass
untouched (one rewrite per chunk would cost the relay). Each rule is checked against the
pinned schemas in tests/support/openai_openapi/ (tests/unit/gateway/test_openai_bodies.py
and, on vLLM's real bodies, tests/integration/test_openai_surface.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

_USAGE_DETAILS = (
    "prompt_tokens_details",
    "completion_tokens_details",
    "input_tokens_details",
    "output_tokens_details",
)
_MESSAGE_OPTIONAL = ("annotations", "function_call", "tool_calls")
_RESPONSE_OPTIONAL = ("text", "user", "prompt", "reasoning", "conversation")


def openai_body(payload: Any) -> Any:
    """`payload` with the spec's optional-but-not-nullable fields dropped where null."""
    if not isinstance(payload, dict):
        return payload
    kind = payload.get("object")
    if kind == "chat.completion":
        for choice in _dicts(payload.get("choices")):
            message = choice.get("message")
            if isinstance(message, dict):
                _drop_nulls(message, _MESSAGE_OPTIONAL)
            logprobs = choice.get("logprobs")
            if isinstance(logprobs, dict):
                # Required (nullable); vLLM never sends refusal tokens, so leaves it out.
                logprobs.setdefault("refusal", None)
    elif kind == "response":
        _response(payload)
    usage = payload.get("usage")
    if isinstance(usage, dict):
        _drop_nulls(usage, _USAGE_DETAILS)
    return payload


def _response(payload: dict[str, Any]) -> None:
    # `error` is required (and nullable): a Response that did not fail says so explicitly.
    payload.setdefault("error", None)
    _drop_nulls(payload, _RESPONSE_OPTIONAL)
    for item in _dicts(payload.get("output")):
        # A reasoning item's status is optional but not nullable.
        _drop_nulls(item, ("status",))
        for part in _dicts(item.get("content")):
            if part.get("type") == "output_text":
                # Required arrays: vLLM sends null when none were asked for.
                for key in ("annotations", "logprobs"):
                    if part.get(key) is None:
                        part[key] = []


def _drop_nulls(record: dict[str, Any], keys: Iterable[str]) -> None:
    for key in keys:
        if key in record and record[key] is None:
            del record[key]


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
