"""The OpenAI surface beyond chat and completions, over ASGI: `GET /v1/models/{id}`, the
Responses API, embeddings, tokenize/detokenize, and OpenAI's error shape for unknown paths
and methods (the same calls through the official client on vLLM:
tests/integration/test_openai_surface.py)."""

from __future__ import annotations

from typing import Any

import pytest

from serve_apps.registry.routing_table import ModelRoute
from serve_apps.relay.model_backend import Method
from tests.unit.gateway.gateway_harness import (
    FakeResponse,
    error_of,
    error_response,
    route,
    serving,
    sse_events,
    table_of,
    yields,
)

pytestmark = pytest.mark.anyio

TABLE = table_of(route("m1"), route("m2"), aliases={"default": "m1"})


async def test_retrieving_a_model_by_name_or_alias_echoes_the_id_asked_for() -> None:
    async with serving(TABLE) as h:
        by_name = (await h.client.get("/v1/models/m1")).json()
        by_alias = (await h.client.get("/v1/models/default")).json()
    assert by_name["id"] == "m1" and by_name["object"] == "model"
    assert by_name["aliases"] == ["default"]
    assert by_alias["id"] == "default" and by_alias["alias_for"] == "m1"


async def test_retrieving_an_unknown_model_is_openais_model_not_found() -> None:
    async with serving(TABLE) as h:
        response = await h.client.get("/v1/models/nope")
    assert response.status_code == 404
    error = error_of(response)
    assert error["code"] == "model_not_found" and error["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/v1/responses", "responses"),
        ("/v1/embeddings", "embeddings"),
        ("/tokenize", "tokenize"),
        ("/detokenize", "detokenize"),
    ],
)
async def test_each_endpoint_is_routed_by_model_to_the_same_method(path: str, method: str) -> None:
    async with serving(TABLE) as h:
        response = await h.client.post(path, json={"model": "default", "input": "x"})
    assert response.status_code == 200, response.text
    called_route, called_method, request = h.backend.calls[-1]
    assert called_route.name == "m1" and called_method == method
    # vLLM's own server validates these bodies: the gateway passes the JSON on as sent.
    assert request == {"model": "m1", "input": "x"}


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/embeddings", "/tokenize", "/detokenize"])
async def test_model_is_required_on_every_endpoint(path: str) -> None:
    async with serving(TABLE) as h:
        response = await h.client.post(path, json={"prompt": "x"})
    assert response.status_code == 400
    assert error_of(response)["param"] == "model"


async def test_a_model_whose_engine_has_no_embeddings_route_answers_400() -> None:
    not_found = error_response("Not Found", 404, kind="NotFoundError")
    async with serving(TABLE, script=yields(not_found)) as h:
        response = await h.client.post("/v1/embeddings", json={"model": "m2", "input": "x"})
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "invalid_request_error"
    assert "m2" in error["message"] and "embeddings" in error["message"]


async def test_a_streamed_response_counts_its_nested_usage_and_passes_events_through() -> None:
    events = [
        'event: response.created\ndata: {"type":"response.created"}\n\n',
        'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
        '"delta":"hi"}\n\n',
        'event: response.completed\ndata: {"type":"response.completed","response":'
        '{"usage":{"input_tokens":3,"output_tokens":1,"total_tokens":4}}}\n\n',
    ]

    async def script(route: ModelRoute, method: Method, request: Any) -> Any:
        # The Responses API has no stream_options: the gateway must not add one.
        assert "stream_options" not in request
        for event in events:
            yield event

    async with serving(TABLE, script=script) as h:
        response = await h.client.post(
            "/v1/responses", json={"model": "m1", "input": "x", "stream": True}
        )
    assert response.status_code == 200
    assert sse_events(response.text) == [e.strip() for e in events]


async def test_an_unknown_path_is_a_404_in_openais_error_shape() -> None:
    async with serving(TABLE) as h:
        response = await h.client.post("/v1/nothing", json={})
    assert response.status_code == 404
    error = error_of(response)
    assert error["type"] == "invalid_request_error" and "/v1/nothing" in error["message"]
    assert "detail" not in response.json()


async def test_a_wrong_method_is_a_405_in_openais_error_shape() -> None:
    async with serving(TABLE) as h:
        response = await h.client.get("/v1/chat/completions")
    assert response.status_code == 405
    assert error_of(response)["type"] == "invalid_request_error"


async def test_non_streaming_answers_pass_through_with_their_own_shape() -> None:
    answer = FakeResponse({"object": "list", "data": [{"object": "embedding", "index": 0}]})
    async with serving(TABLE, script=yields(answer)) as h:
        response = await h.client.post("/v1/embeddings", json={"model": "m1", "input": "x"})
    assert response.json()["data"][0]["object"] == "embedding"
