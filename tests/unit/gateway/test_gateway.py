"""The OpenAI gateway, driven over ASGI: auth, body limits, resolution, forwarding and
backend failures (holds, in-flight accounting and the model list: test_gateway_holds.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from domain.model_state import ModelState
from serve_apps.gateway.gateway_metrics import RecordingGatewayMetrics, RequestOutcome
from serve_apps.registry.routing_table import ModelRoute
from serve_apps.relay.model_backend import Method
from tests.support.waiting import wait_until_async
from tests.unit.gateway.gateway_harness import (
    AUTH,
    CHAT,
    FakeResponse,
    assert_unavailable,
    error_of,
    error_response,
    route,
    serving,
    sse_events,
    table_of,
    yields,
)

pytestmark = pytest.mark.anyio

# ---------------------------------------------------------------- auth


async def test_a_request_without_a_bearer_token_gets_401_when_keys_are_set() -> None:
    async with serving(api_keys=["k1", "k2"]) as h:
        response = await h.chat(CHAT)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert error_of(response)["type"] == "authentication_error"
    assert error_of(response)["code"] == "invalid_api_key"
    assert h.backend.calls == []


@pytest.mark.parametrize("authorization", ["Bearer k3", "Bearer ", "Basic k1", "k1"])
async def test_a_wrong_bearer_token_gets_401(authorization: str) -> None:
    async with serving(api_keys=["k1", "k2"]) as h:
        response = await h.chat(CHAT, headers={"Authorization": authorization})
    assert response.status_code == 401
    assert h.backend.calls == []


async def test_any_of_several_keys_is_accepted() -> None:
    async with serving(api_keys=["k1", "k2"]) as h:
        for key in ("k1", "k2"):
            response = await h.chat(CHAT, headers={"Authorization": f"Bearer {key}"})
            assert response.status_code == 200, response.text


async def test_the_model_list_needs_a_key_too() -> None:
    async with serving(api_keys=["k2"]) as h:
        assert (await h.client.get("/v1/models")).status_code == 401
        assert (await h.client.get("/v1/models", headers=AUTH)).status_code == 200


async def test_health_is_open_without_a_key() -> None:
    async with serving(table_of(route("a"), route("b", ModelState.LOADING)), api_keys=["k"]) as h:
        response = await h.client.get("/health")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "routing_table_version": 1,
        "models_ready": 1,
        "requests_by_path": {"handle": 0},
        "direct_endpoints": {"a": 0, "b": 0},
    }


async def test_without_keys_the_endpoint_is_open() -> None:
    async with serving() as h:
        assert (await h.chat(CHAT)).status_code == 200


async def test_auth_is_checked_before_the_body_size() -> None:
    async with serving(api_keys=["k"], max_body_bytes=1024) as h:
        response = await h.client.post("/v1/chat/completions", content=b"x" * 4096)
    assert response.status_code == 401


# ---------------------------------------------------------------- body limits and parsing


async def test_a_body_over_the_limit_by_content_length_gets_413() -> None:
    async with serving(max_body_bytes=1024) as h:
        body = {**CHAT, "padding": "x" * 2000}
        response = await h.chat(body)
    assert response.status_code == 413
    assert error_of(response)["code"] == "request_too_large"
    assert "larger than 1024 bytes" in error_of(response)["message"]
    assert h.backend.calls == []


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def test_a_chunked_body_over_the_limit_gets_413() -> None:
    async with serving(max_body_bytes=1024) as h:
        response = await h.client.post(
            "/v1/chat/completions", content=_chunks(b'{"model": "a", "p": "', b"x" * 1100, b'"}')
        )
    assert response.status_code == 413
    assert error_of(response)["code"] == "request_too_large"
    assert h.backend.calls == []


async def test_a_chunked_body_under_the_limit_is_read_whole() -> None:
    async with serving(max_body_bytes=1024) as h:
        response = await h.client.post(
            "/v1/chat/completions", content=_chunks(b'{"model": ', b'"a", "messages"', b": []}")
        )
    assert response.status_code == 200, response.text
    (_, _, request) = h.backend.calls[0]
    assert request.body == {"model": "a", "messages": []}


async def test_a_client_that_leaves_before_its_body_arrives_is_counted_and_not_answered() -> None:
    metrics = RecordingGatewayMetrics()
    async with serving(metrics=metrics) as h:
        sent: list[Any] = []
        part = {"type": "http.request", "body": b'{"model": "a"', "more_body": True}
        messages = iter([part, {"type": "http.disconnect"}])

        async def receive() -> Any:
            return next(messages)

        async def send(message: Any) -> None:
            sent.append(message)

        scope = {
            "type": "http", "method": "POST", "path": "/v1/chat/completions",
            "headers": [(b"content-type", b"application/json")], "query_string": b"",
        }  # fmt: skip
        await h.gateway.app(scope, receive, send)
    assert sent == []
    (record,) = metrics.requests
    assert (record.outcome, record.status_code) == (RequestOutcome.CANCELLED, 499)
    assert h.backend.calls == []


@pytest.mark.parametrize(
    ("content", "code", "message"),
    [
        (b"{not json", "invalid_json", "Request body is not valid JSON"),
        (b"\xff\xfe", "invalid_json", "Request body is not valid JSON"),
        (b"", "invalid_json", "Request body is not valid JSON"),
        (b"[1, 2]", "invalid_request", "Request body must be a JSON object."),
        (b'"model"', "invalid_request", "Request body must be a JSON object."),
        (b'{"messages": []}', "invalid_request", "The 'model' field is required"),
        (b'{"model": 5}', "invalid_request", "The 'model' field is required"),
        (b'{"model": ""}', "invalid_request", "The 'model' field is required"),
    ],
)
async def test_a_malformed_body_gets_400(content: bytes, code: str, message: str) -> None:
    async with serving() as h:
        response = await h.client.post("/v1/chat/completions", content=content)
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == code
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(message)
    assert h.backend.calls == []


async def test_a_deeply_nested_body_gets_400_not_a_crash() -> None:
    async with serving(max_body_bytes=1024 * 1024) as h:
        response = await h.client.post("/v1/chat/completions", content=b"[" * 100_000)
    assert response.status_code == 400


async def test_a_request_the_parser_refuses_gets_400_with_its_first_lines() -> None:
    async with serving() as h:
        response = await h.chat({**CHAT, "invalid": "messages"})
    assert response.status_code == 400
    error = error_of(response)
    assert error["message"] == "1 validation error for Request messages Field required"
    assert error["code"] == "invalid_request"
    assert h.backend.calls == []


# ---------------------------------------------------------------- resolution


async def test_an_unknown_model_gets_404() -> None:
    async with serving() as h:
        response = await h.chat({**CHAT, "model": "gpt-9"})
    assert response.status_code == 404
    error = error_of(response)
    assert (error["code"], error["param"]) == ("model_not_found", "model")
    assert "'gpt-9' does not exist" in error["message"]
    assert "retry-after" not in response.headers


async def test_a_removed_model_gets_404_naming_its_replacement() -> None:
    table = table_of(route("old", ModelState.REMOVED, replaced_by="new"), route("new"))
    async with serving(table) as h:
        response = await h.chat({**CHAT, "model": "old"})
    assert response.status_code == 404
    assert "send requests to 'new' instead" in error_of(response)["message"]


@pytest.mark.parametrize(
    "state", [ModelState.LOADING, ModelState.DRAINING, ModelState.DEGRADED], ids=str
)
async def test_a_model_that_is_not_ready_gets_503_with_retry_after(state: ModelState) -> None:
    async with serving(table_of(route("a", state))) as h:
        response = await h.chat(CHAT)
    error = assert_unavailable(response)
    assert error["code"] == "model_unavailable"
    assert f"is {state.value}" in error["message"]
    assert h.backend.calls == []


async def test_a_failed_model_gets_503_with_its_error() -> None:
    async with serving(table_of(route("a", ModelState.FAILED, error="no GPU left"))) as h:
        response = await h.chat(CHAT)
    assert "failed to start: no GPU left" in assert_unavailable(response)["message"]


async def test_a_model_with_no_running_replica_gets_503() -> None:
    async with serving(running={"model-a": 0}) as h:
        response = await h.chat(CHAT)
    assert "has no running replica" in assert_unavailable(response)["message"]
    assert h.backend.calls == []


async def test_health_older_than_the_last_routing_change_does_not_refuse_a_ready_model() -> None:
    # A rolled-back model is redeployed under the same app name and published READY by the
    # manager after its own warm-up; a "0 replicas" seen before that must not refuse it.
    async with serving(running={"model-a": 0}, health_poll_s=60) as h:
        assert (await h.chat(CHAT)).status_code == 503
        h.registry.publish(table_of(route("a"), version=2))
        await wait_until_async(lambda: h.routes.table.version == 2)
        assert (await h.chat(CHAT)).status_code == 200


async def test_a_model_with_running_replicas_or_unknown_health_is_forwarded() -> None:
    table = table_of(route("a"), route("b"))
    async with serving(table, running={"model-a": 2}) as h:
        assert (await h.chat(CHAT)).status_code == 200
        assert (await h.chat({**CHAT, "model": "b"})).status_code == 200


async def test_an_alias_is_forwarded_under_the_models_own_name() -> None:
    async with serving(table_of(route("a"), aliases={"default": "a"})) as h:
        response = await h.chat({**CHAT, "model": "default"})
    assert response.status_code == 200
    ((sent_route, method, request),) = h.backend.calls
    assert (sent_route.name, method) == ("a", "chat")
    assert request.body["model"] == "a"


# ---------------------------------------------------------------- forwarding


async def test_a_non_streaming_answer_is_passed_through_as_json() -> None:
    answer = {"id": "cmpl-1", "object": "chat.completion", "choices": [{"index": 0}]}
    async with serving(script=yields(FakeResponse(answer))) as h:
        response = await h.chat(CHAT)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == answer


async def test_completions_are_forwarded_as_completions() -> None:
    async with serving() as h:
        response = await h.client.post("/v1/completions", json={"model": "a", "prompt": "x"})
    assert response.status_code == 200
    assert h.backend.calls[0][1] == "completions"
    assert h.backend.calls[0][2].method == "completions"


async def test_a_streamed_answer_is_passed_through_as_sse() -> None:
    chunks = [
        ['data: {"n": 1}\n\n', 'data: {"n": 2}\n\n'],
        ['data: {"n": 3}\n\n'],
        ["data: [DONE]\n\n"],
    ]
    async with serving(script=yields(*chunks)) as h:
        response = await h.chat({**CHAT, "stream": True})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text == "".join(part for chunk in chunks for part in chunk)


async def test_streamed_objects_are_sent_as_sse_data_lines() -> None:
    async with serving(script=yields(FakeResponse({"n": 1}), "data: [DONE]\n\n")) as h:
        response = await h.chat({**CHAT, "stream": True})
    assert sse_events(response.text) == ['{"n": 1}', "[DONE]"]


async def test_a_mid_stream_exception_ends_the_stream_with_an_error_event_and_done() -> None:
    script = yields(['data: {"n": 1}\n\n'], then=RuntimeError("engine died"))
    async with serving(script=script) as h:
        response = await h.chat({**CHAT, "stream": True})
    assert response.status_code == 200
    events = sse_events(response.text)
    assert events[0] == '{"n": 1}'
    assert events[-1] == "[DONE]"
    error = json.loads(events[1])["error"]
    assert error["type"] == "service_unavailable"
    assert "could not serve the request (RuntimeError)" in error["message"]
    assert len(events) == 3


async def test_a_mid_stream_error_object_ends_the_stream() -> None:
    script = yields(
        ['data: {"n": 1}\n\n'],
        error_response("context too long", 400),
        ['data: {"never": true}\n\n'],
    )
    async with serving(script=script) as h:
        response = await h.chat({**CHAT, "stream": True})
    events = sse_events(response.text)
    assert events[0] == '{"n": 1}'
    assert json.loads(events[1])["error"]["message"] == "context too long"
    assert events[2:] == ["[DONE]"]


# ---------------------------------------------------------------- backend failures


async def test_a_backend_that_raises_before_the_first_chunk_gets_503() -> None:
    async with serving(script=yields(then=ConnectionError("replica gone"))) as h:
        response = await h.chat(CHAT)
    message = assert_unavailable(response)["message"]
    assert "could not serve the request (ConnectionError)" in message


async def test_a_backend_whose_stream_call_itself_raises_gets_503() -> None:
    def lookup_fails(route: ModelRoute, method: Method, request: Any) -> AsyncIterator[Any]:
        raise KeyError("no such deployment")

    async with serving(script=lookup_fails) as h:
        response = await h.chat(CHAT)
        assert h.gateway.in_flight["a"] == 0
    assert "could not serve the request (KeyError)" in assert_unavailable(response)["message"]


async def test_a_first_chunk_that_never_comes_times_out_with_503() -> None:
    cancelled = asyncio.Event()

    async def silent(route: ModelRoute, method: Method, request: Any) -> AsyncIterator[Any]:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        yield "never"

    async with serving(script=silent, first_chunk_timeout_s=0.05) as h:
        response = await h.chat(CHAT)
        assert h.gateway.in_flight["a"] == 0
    assert "sent nothing for 0.05 s" in assert_unavailable(response)["message"]
    assert cancelled.is_set()


async def test_a_backend_that_yields_nothing_gets_502() -> None:
    async with serving(script=yields()) as h:
        response = await h.chat(CHAT)
    assert response.status_code == 502
    assert error_of(response)["type"] == "server_error"


async def test_a_4xx_error_object_as_the_first_chunk_keeps_its_status() -> None:
    async with serving(script=yields(error_response("max_tokens is too large", 400))) as h:
        response = await h.chat({**CHAT, "stream": True})
    assert response.status_code == 400
    assert "retry-after" not in response.headers
    assert error_of(response) == {
        "message": "max_tokens is too large",
        "type": "invalid_request_error",
        "param": None,
        "code": "BadRequestError",
    }


@pytest.mark.parametrize(
    "message, code",
    [
        ("the engine is overloaded", 503),
        ("EngineCore encountered an issue. See stack trace (above) for the root cause.", 500),
        ("", 500),  # EngineGenerateError: the generate loop failed, as when the core dies
    ],
)
async def test_a_dead_or_overloaded_engine_as_the_first_chunk_gets_503(
    message: str, code: int
) -> None:
    script = yields(error_response(message, code, "InternalServerError"))
    async with serving(script=script) as h:
        response = await h.chat(CHAT)
    error = assert_unavailable(response)
    assert error["message"] == message


@pytest.mark.parametrize("code", [500, 501, None, "oops"])
async def test_the_engines_own_500_for_a_request_stays_a_500_server_error(code: Any) -> None:
    """A deterministic failure (a tool parser, a chat template): retrying would repeat it,
    so no Retry-After, and the official client does not retry it as a 503."""
    script = yields(error_response("tool parser failed", code, "InternalServerError"))
    async with serving(script=script) as h:
        response = await h.chat(CHAT)
    assert response.status_code == (501 if code == 501 else 500), response.text
    assert "retry-after" not in response.headers
    assert response.headers["x-should-retry"] == "false"
    assert error_of(response) == {
        "message": "tool parser failed",
        "type": "server_error",
        "param": None,
        "code": "InternalServerError",
    }
