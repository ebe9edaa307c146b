"""Bad input against the gateway, property-based: whatever a client sends, the answer is a
4xx in OpenAI's error shape or a normal answer, never a 5xx and never a crash.

The gateway runs with vLLM's own request models (the parser the deployed gateway uses), a
fake routing table and a fake model backend, in one event loop kept for the whole module,
so each generated example costs one in-process ASGI request. The bodies are generated from
the request models' own field lists (schema-driven) and from arbitrary JSON and bytes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from serve_apps.gateway.app import Gateway
from serve_apps.gateway.gateway_settings import GatewaySettings
from serve_apps.gateway.serve_deployment import parse_openai_request
from serve_apps.registry.replica_health import ReplicaHealthView
from serve_apps.registry.route_view import RouteView
from serve_apps.registry.routing_table import ModelRoute, RoutingTable
from serve_apps.relay.model_backend import Method
from tests.unit.gateway.gateway_harness import (
    FakeHealth,
    FakeRegistry,
    FakeResponse,
    route,
    table_of,
)

MAX_BODY_BYTES = 64 * 1024
CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
VALID = {
    "chat": {"model": "a", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
    "completions": {"model": "a", "prompt": "hi", "max_tokens": 4},
}
PATHS: dict[Method, str] = {"chat": CHAT_PATH, "completions": COMPLETIONS_PATH}

# Every example is one in-process request; a few hundred per property keep this module at
# a few seconds. No deadline: the first example pays for importing vLLM's models.
FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class EchoBackend:
    """A model that answers every request it is given: SSE chunks when asked to stream."""

    def stream(
        self, route: ModelRoute, method: Method, request: Any, body: Mapping[str, Any], **_: Any
    ) -> AsyncIterator[Any]:
        return self._answer(route, request)

    def requests_by_path(self) -> Mapping[str, int]:
        return {}

    def endpoints_by_app(self) -> Mapping[str, int]:
        return {}

    async def _answer(self, route: ModelRoute, request: Any) -> AsyncIterator[Any]:
        if getattr(request, "stream", False):
            yield ['data: {"n": 1}\n\n']
            yield ["data: [DONE]\n\n"]
        else:
            yield FakeResponse({"object": "chat.completion", "model": route.name})


@dataclass
class Client:
    """Synchronous calls into the gateway, which lives in the portal's event loop."""

    portal: BlockingPortal
    http: httpx.AsyncClient

    def post(
        self, path: str, content: bytes | Callable[[], AsyncIterator[bytes]]
    ) -> httpx.Response:
        async def send() -> httpx.Response:
            body = content() if callable(content) else content
            return await self.http.post(
                path, content=body, headers={"Content-Type": "application/json"}
            )

        return self.portal.call(send)


@asynccontextmanager
async def _serving() -> AsyncIterator[httpx.AsyncClient]:
    table: RoutingTable = table_of(route("a"), aliases={"default": "a"})
    registry = FakeRegistry(table)
    routes = RouteView(registry.fetch)
    gateway = Gateway(
        GatewaySettings(max_body_bytes=MAX_BODY_BYTES, first_chunk_timeout_s=5.0),
        routes,
        ReplicaHealthView(FakeHealth().fetch, period_s=0.05),
        EchoBackend(),
        parse_openai_request,
    )
    gateway.start()
    try:
        assert await routes.wait_loaded(2.0)
        transport = httpx.ASGITransport(app=gateway.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            yield client
    finally:
        await gateway.stop()


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with (
        start_blocking_portal(backend="asyncio") as portal,
        portal.wrap_async_context_manager(_serving()) as http,
    ):
        yield Client(portal, http)


def assert_not_a_server_error(response: httpx.Response) -> None:
    """A 2xx answer, or a 4xx in OpenAI's JSON error shape (what the official clients parse)."""
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        error = response.json()["error"]
        assert isinstance(error["message"], str) and error["message"]
        assert error["type"] == "invalid_request_error"
        assert "\n" not in error["message"]


# ---------------------------------------------------------------- strategies

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
METHODS: tuple[Method, ...] = ("chat", "completions")
methods = st.sampled_from(METHODS)


def _fields_of(method: Method) -> list[str]:
    from ray.serve.llm.openai_api_models import ChatCompletionRequest, CompletionRequest

    model = ChatCompletionRequest if method == "chat" else CompletionRequest
    return sorted(model.model_fields)


@st.composite
def field_with_a_wrong_value(draw: st.DrawFn) -> tuple[Method, dict[str, Any]]:
    """A valid request with one of its schema's fields set to an arbitrary JSON value."""
    method: Method = draw(methods)
    body = dict(VALID[method])
    field = draw(st.sampled_from(_fields_of(method)))
    body[field] = draw(json_values)
    return method, body


REQUIRED: dict[Method, tuple[str, ...]] = {
    "chat": ("model", "messages"),
    "completions": ("model", "prompt"),
}


@st.composite
def required_fields_left_out(draw: st.DrawFn) -> tuple[Method, dict[str, Any]]:
    """A valid request less at least one required field (and maybe optional ones too)."""
    method: Method = draw(methods)
    body = dict(VALID[method])
    for key in draw(st.sets(st.sampled_from(REQUIRED[method]), min_size=1)):
        del body[key]
    if draw(st.booleans()):
        del body["max_tokens"]
    return method, body


# Unpaired UTF-16 surrogates written as JSON escapes: legal JSON syntax, not encodable text.
lone_surrogates = st.sampled_from([r"\ud800", r"\udfff", r"\uDBFF x", r"\udc00\ud800"])


# ---------------------------------------------------------------- properties


@FUZZ
@given(method=methods, value=json_values)
def test_any_json_value_as_the_body_is_answered_without_a_server_error(
    client: Client, method: Method, value: Any
) -> None:
    assert_not_a_server_error(client.post(PATHS[method], json.dumps(value).encode()))


@FUZZ
@given(method=methods, content=st.binary(max_size=512))
def test_any_bytes_as_the_body_are_answered_without_a_server_error(
    client: Client, method: Method, content: bytes
) -> None:
    assert_not_a_server_error(client.post(PATHS[method], content))


@FUZZ
@given(case=field_with_a_wrong_value())
def test_any_schema_field_with_any_value_is_answered_without_a_server_error(
    client: Client, case: tuple[Method, dict[str, Any]]
) -> None:
    method, body = case
    assert_not_a_server_error(client.post(PATHS[method], json.dumps(body).encode()))


@FUZZ
@given(case=required_fields_left_out())
def test_a_request_missing_fields_gets_400(
    client: Client, case: tuple[Method, dict[str, Any]]
) -> None:
    method, body = case
    response = client.post(PATHS[method], json.dumps(body).encode())
    assert response.status_code == 400, response.text
    assert_not_a_server_error(response)


@FUZZ
@given(method=methods, max_tokens=st.integers(min_value=2**31, max_value=2**200))
def test_a_huge_max_tokens_is_not_a_server_error(
    client: Client, method: Method, max_tokens: int
) -> None:
    # The gateway passes it on; the engine answers 400 for one over max_model_len (the real
    # stack's test checks that part).
    body = {**VALID[method], "max_tokens": max_tokens}
    assert_not_a_server_error(client.post(PATHS[method], json.dumps(body).encode()))


@FUZZ
@given(
    method=methods,
    bad=st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80"]),
    where=st.integers(min_value=0, max_value=40),
)
def test_invalid_utf8_anywhere_in_the_body_gets_400(
    client: Client, method: Method, bad: bytes, where: int
) -> None:
    raw = json.dumps(VALID[method]).encode()
    at = min(where, len(raw))
    response = client.post(PATHS[method], raw[:at] + bad + raw[at:])
    assert response.status_code == 400, response.text
    assert_not_a_server_error(response)


@FUZZ
@given(
    method=methods,
    surrogate=lone_surrogates,
    field=st.sampled_from(["model", "content", "key"]),
)
def test_an_unpaired_surrogate_escape_gets_400(
    client: Client, method: Method, surrogate: str, field: str
) -> None:
    body = json.dumps(VALID[method])
    if field == "model":
        raw = body.replace('"a"', f'"a{surrogate}"', 1)
    elif field == "content":
        raw = body.replace('"hi"', f'"hi{surrogate}"', 1)
    else:
        raw = body.replace('{"model"', f'{{"{surrogate}": 1, "model"', 1)
    response = client.post(PATHS[method], raw.encode())
    assert response.status_code == 400, response.text
    assert "surrogate" in response.json()["error"]["message"]


def test_a_paired_surrogate_escape_is_an_ordinary_character(client: Client) -> None:
    # json.dumps' default ASCII output writes an emoji as a pair of escapes.
    body = {**VALID["chat"], "messages": [{"role": "user", "content": "hi \U0001f600"}]}
    response = client.post(CHAT_PATH, json.dumps(body, ensure_ascii=True).encode())
    assert response.status_code == 200, response.text


@settings(FUZZ, max_examples=40)
@given(
    method=methods,
    depth=st.integers(min_value=1, max_value=MAX_BODY_BYTES // 2 - 100),
    opener=st.sampled_from(["[", '{"k":']),
)
def test_deeply_nested_json_gets_400_or_an_answer(
    client: Client, method: Method, depth: int, opener: str
) -> None:
    closer = "]" if opener == "[" else "}"
    nested = opener * depth + "1" + closer * depth
    raw = f'{{"model": "a", "messages": {nested}, "prompt": {nested}}}'.encode()
    assert_not_a_server_error(client.post(PATHS[method], raw[:MAX_BODY_BYTES]))


@settings(FUZZ, max_examples=30)
@given(
    method=methods,
    extra=st.integers(min_value=1, max_value=3 * MAX_BODY_BYTES),
    chunked=st.booleans(),
)
def test_a_body_over_the_limit_gets_413_however_it_is_sent(
    client: Client, method: Method, extra: int, chunked: bool
) -> None:
    raw = json.dumps({**VALID[method], "pad": "x" * (MAX_BODY_BYTES + extra)}).encode()

    async def trickle() -> AsyncIterator[bytes]:
        for start in range(0, len(raw), 4096):
            yield raw[start : start + 4096]

    response = client.post(PATHS[method], trickle if chunked else raw)
    assert response.status_code == 413, response.text
    assert response.json()["error"]["code"] == "request_too_large"


def test_a_request_vllm_refuses_in_its_own_validator_gets_400_not_500(client: Client) -> None:
    # vLLM raises its own VLLMValidationError (not a ValueError) from a model validator.
    body = {**VALID["chat"], "response_format": {"type": "json_schema"}}
    response = client.post(CHAT_PATH, json.dumps(body).encode())
    assert response.status_code == 400, response.text
    assert "json_schema" in response.json()["error"]["message"]
