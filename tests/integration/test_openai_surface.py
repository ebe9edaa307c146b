"""The OpenAI surface beyond chat and completions, through the official `openai` client on
the real stack (vLLM CPU engines; Kimi serves `default`, Llama `small`), and every body the
gateway returns checked against OpenAI's pinned schemas (tests/support/openai_openapi/).
Also what production clients expect of the stream: a client that goes away mid-stream
aborts its request on the engine. Read-only on the shared real stack."""

from __future__ import annotations

import time
from typing import Any

import httpx
import openai
import pytest

from tests.support import shared_stacks
from tests.support.openai_schema import schema_errors
from tests.support.running_stack import RunningStack
from tests.support.waiting import wait_until

KIMI, LLAMA = shared_stacks.KIMI, shared_stacks.LLAMA
API_KEY = shared_stacks.API_KEY
AUTH = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture(scope="module")
def stack(real_stack: RunningStack) -> RunningStack:
    return real_stack


@pytest.fixture(scope="module")
def client(stack: RunningStack) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.base_url, api_key=API_KEY, max_retries=0, timeout=120)


def _root(stack: RunningStack) -> str:
    return stack.base_url.removesuffix("/v1")


def _post(stack: RunningStack, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{_root(stack)}{path}", json=body, headers=AUTH, timeout=120)


def test_a_model_is_retrieved_by_alias_and_by_name(client: openai.OpenAI) -> None:
    by_alias = client.models.retrieve("default")
    assert by_alias.id == "default"
    assert (by_alias.model_extra or {})["alias_for"] == KIMI
    assert client.models.retrieve(LLAMA).id == LLAMA
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("no-such-model")
    assert missing.value.code == "model_not_found"


def test_the_responses_api_answers_and_streams(client: openai.OpenAI) -> None:
    answer = client.responses.create(model="small", input="Hello", max_output_tokens=6)
    assert answer.model == LLAMA and answer.output_text
    assert answer.usage is not None and answer.usage.output_tokens > 0
    kinds = [
        e.type
        for e in client.responses.create(
            model="small", input="Hello", max_output_tokens=6, stream=True
        )
    ]
    assert kinds[0] == "response.created" and kinds[-1] in (
        "response.completed",
        "response.incomplete",
    )
    assert "response.output_text.delta" in kinds


def test_embeddings_on_a_generative_model_is_a_clear_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client.embeddings.create(model="small", input="Hello")
    body = refused.value.body
    assert isinstance(body, dict) and body["type"] == "invalid_request_error"
    assert "embeddings" in body["message"] and LLAMA in body["message"]


def test_tokenize_and_detokenize_round_trip(stack: RunningStack) -> None:
    tokens = _post(stack, "/tokenize", {"model": "small", "prompt": "switch yard"})
    assert tokens.status_code == 200, tokens.text
    ids = tokens.json()["tokens"]
    assert ids and tokens.json()["count"] == len(ids)
    text = _post(stack, "/detokenize", {"model": "small", "tokens": ids})
    assert text.status_code == 200 and "switch" in text.json()["prompt"]
    missing = _post(stack, "/tokenize", {"prompt": "x"})
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "model"


def test_unknown_paths_and_methods_answer_in_openais_error_shape(stack: RunningStack) -> None:
    unknown = _post(stack, "/v1/nothing-here", {})
    assert unknown.status_code == 404
    assert schema_errors("ErrorResponse", unknown.json()) == []
    wrong = httpx.get(f"{stack.base_url}/chat/completions", headers=AUTH, timeout=30)
    assert wrong.status_code == 405
    assert schema_errors("ErrorResponse", wrong.json()) == []


@pytest.mark.parametrize(
    ("path", "body", "schema"),
    [
        (
            "/v1/chat/completions",
            {"model": "small", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4},
            "CreateChatCompletionResponse",
        ),
        (
            "/v1/chat/completions",
            {"model": "default", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4},
            "CreateChatCompletionResponse",
        ),
        (
            "/v1/completions",
            {"model": "small", "prompt": "Hi", "max_tokens": 4},
            "CreateCompletionResponse",
        ),
        (
            "/v1/completions",
            {"model": "small", "prompt": "Hi", "max_tokens": 4, "logprobs": 2},
            "CreateCompletionResponse",
        ),
        ("/v1/responses", {"model": "small", "input": "Hi", "max_output_tokens": 4}, "Response"),
        # Kimi's reasoning parser: reasoning items, and chat logprobs.
        ("/v1/responses", {"model": "default", "input": "Hi", "max_output_tokens": 4}, "Response"),
        (
            "/v1/chat/completions",
            {
                "model": "default",
                "messages": [{"role": "user", "content": "Hi"}],
                "max_tokens": 3,
                "logprobs": True,
                "top_logprobs": 2,
            },
            "CreateChatCompletionResponse",
        ),
        # vLLM refuses these itself; its error bodies pass through the gateway.
        (
            "/v1/chat/completions",
            {"model": "small", "messages": [], "max_tokens": 99999},
            "ErrorResponse",
        ),
        ("/v1/completions", {"model": "small", "prompt": "Hi", "n": 0}, "ErrorResponse"),
    ],
)
def test_bodies_validate_against_openais_pinned_schemas(
    stack: RunningStack, path: str, body: dict[str, Any], schema: str
) -> None:
    response = _post(stack, path, body)
    assert (response.status_code == 200) == (schema != "ErrorResponse"), response.text
    assert schema_errors(schema, response.json()) == []


def test_the_model_list_and_a_model_validate(stack: RunningStack) -> None:
    listed = httpx.get(f"{stack.base_url}/models", headers=AUTH, timeout=30).json()
    assert schema_errors("ListModelsResponse", listed) == []
    one = httpx.get(f"{stack.base_url}/models/default", headers=AUTH, timeout=30).json()
    assert schema_errors("Model", one) == []


def _engine_series(stack: RunningStack, name: str, model: str) -> float:
    """The sum of a vLLM series for `model` over every node's metrics agent."""
    total = 0.0
    for line in stack.metrics_text().splitlines():
        if line.startswith(name + "{") and f'model_name="{model}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_a_client_that_disconnects_mid_stream_aborts_its_request_on_the_engine(
    stack: RunningStack,
) -> None:
    generated = "ray_vllm_generation_tokens_total"
    running = "ray_vllm_num_requests_running"
    before = _engine_series(stack, generated, LLAMA)
    body = {
        "model": "small",
        "prompt": "Count",
        "max_tokens": 240,
        "ignore_eos": True,
        "n": 4,
        "stream": True,
    }
    with (
        httpx.Client(timeout=60) as client,
        client.stream("POST", f"{stack.base_url}/completions", json=body, headers=AUTH) as reply,
    ):
        assert reply.status_code == 200
        for count, _ in enumerate(reply.iter_raw(), start=1):
            if count >= 3:
                break  # leaving the block closes the connection mid-stream
    # Ray exports the engine's metrics every 2 s on the suite's stacks: wait for a report
    # newer than the disconnect, then the request must be gone and cut short.
    time.sleep(5)
    wait_until(lambda: _engine_series(stack, running, LLAMA) == 0, 30)
    made = _engine_series(stack, generated, LLAMA) - before
    assert made < 4 * 240 / 2, f"the engine generated {made:.0f} of 960 tokens: not aborted"
