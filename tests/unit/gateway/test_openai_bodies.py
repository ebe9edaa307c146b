"""Bodies the gateway returns match OpenAI's published schemas (the pinned extract in
tests/support/openai_openapi/), starting from what vLLM really sends (vllm_bodies.json)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from serve_apps.gateway.openai_bodies import openai_body
from serve_apps.gateway.openai_errors import error_body
from tests.support.openai_schema import pinned_commit, schema_errors

_CAPTURED = json.loads((Path(__file__).parent / "vllm_bodies.json").read_text())
SCHEMAS = {
    "chat.completion": "CreateChatCompletionResponse",
    "text_completion": "CreateCompletionResponse",
    "response": "Response",
    "chat.completion+logprobs": "CreateChatCompletionResponse",
    "response+reasoning": "Response",
}


def captured(kind: str) -> dict[str, Any]:
    body: dict[str, Any] = copy.deepcopy(_CAPTURED[kind])
    return body


def test_the_pinned_schemas_name_their_commit() -> None:
    assert len(pinned_commit()) == 40


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_vllms_own_body_breaks_the_spec(kind: str) -> None:
    # What the issue reports: typed clients generated from the spec refuse these.
    assert schema_errors(SCHEMAS[kind], captured(kind))


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_the_gateways_body_matches_the_spec(kind: str) -> None:
    assert schema_errors(SCHEMAS[kind], openai_body(captured(kind))) == []


def test_null_optional_fields_are_dropped_and_values_kept() -> None:
    body = openai_body(captured("chat.completion"))
    message = body["choices"][0]["message"]
    assert "annotations" not in message and "function_call" not in message
    assert message["content"] == _CAPTURED["chat.completion"]["choices"][0]["message"]["content"]
    assert "prompt_tokens_details" not in body["usage"]
    assert body["usage"]["completion_tokens"] == 4


def test_present_values_are_never_touched() -> None:
    body = captured("chat.completion")
    body["choices"][0]["message"]["annotations"] = [{"type": "url_citation"}]
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 3}
    out = openai_body(body)
    assert out["choices"][0]["message"]["annotations"] == [{"type": "url_citation"}]
    assert out["usage"]["prompt_tokens_details"] == {"cached_tokens": 3}


def test_a_response_says_it_has_no_error_and_gets_its_required_arrays() -> None:
    body = openai_body(captured("response"))
    assert body["error"] is None
    assert body["output"][0]["content"][0]["logprobs"] == []


def test_anything_else_passes_unchanged() -> None:
    embeddings = {"object": "list", "data": [{"object": "embedding", "embedding": [0.1]}]}
    assert openai_body(copy.deepcopy(embeddings)) == embeddings
    assert openai_body([1, 2]) == [1, 2]


@pytest.mark.parametrize("status", [400, 401, 404, 405, 413, 429, 503])
def test_gateway_error_bodies_match_the_spec(status: int) -> None:
    assert schema_errors("ErrorResponse", error_body(status, "m", code="c", param=None)) == []
    assert schema_errors("ErrorResponse", error_body(status, "m")) == []
