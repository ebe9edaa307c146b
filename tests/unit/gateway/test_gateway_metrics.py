"""What the gateway measures: one record per request with exact labels, tokens from the
engine's usage report, streaming timings, in-flight and held requests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from serve_apps.gateway.app import Gateway
from serve_apps.gateway.gateway_metrics import (
    NO_MODEL,
    HoldCause,
    HoldOutcome,
    RecordingGatewayMetrics,
    RequestOutcome,
    sampled_gaps,
)
from serve_apps.gateway.gateway_settings import GatewaySettings
from serve_apps.registry.replica_health import ReplicaHealthView
from serve_apps.registry.route_view import RouteView
from serve_apps.registry.routing_table import RoutingTable
from tests.support.waiting import wait_until_async
from tests.unit.gateway.gateway_harness import (
    CHAT,
    FakeBackend,
    FakeHealth,
    FakeRegistry,
    FakeResponse,
    Script,
    parse_request,
    route,
    swap_tables,
    table_of,
    yields,
)

pytestmark = pytest.mark.anyio

USAGE = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}


def sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload)}\n\n"


def token(text: str) -> list[str]:
    return [sse({"object": "chat.completion.chunk", "choices": [{"delta": {"content": text}}]})]


USAGE_CHUNK = [
    sse({"object": "chat.completion.chunk", "choices": [], "usage": USAGE}),
    "data: [DONE]\n\n",
]
STREAM = yields(token("a"), token("b"), token("c"), USAGE_CHUNK)


@dataclass
class Metered:
    gateway: Gateway
    client: httpx.AsyncClient
    registry: FakeRegistry
    backend: FakeBackend
    metrics: RecordingGatewayMetrics


@asynccontextmanager
async def metered(
    table: RoutingTable | None = None, *, script: Script | None = None, **settings: Any
) -> AsyncIterator[Metered]:
    registry = FakeRegistry(table if table is not None else table_of(route("a")))
    backend = FakeBackend(script) if script else FakeBackend()
    metrics = RecordingGatewayMetrics()
    routes = RouteView(registry.fetch)
    gateway = Gateway(
        GatewaySettings.model_validate(settings),
        routes,
        ReplicaHealthView(FakeHealth().fetch, period_s=0.01),
        backend,
        parse_request,
        metrics=metrics,
    )
    gateway.start()
    try:
        assert await routes.wait_loaded(2.0)
        transport = httpx.ASGITransport(app=gateway.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            yield Metered(gateway, client, registry, backend, metrics)
    finally:
        await gateway.stop()


async def test_a_completed_request_is_recorded_with_its_model_alias_and_tokens() -> None:
    answer = yields(FakeResponse({"object": "chat.completion", "usage": USAGE}))
    async with metered(table_of(route("a"), aliases={"default": "a"}), script=answer) as m:
        response = await m.client.post("/v1/chat/completions", json={**CHAT, "model": "default"})
    assert response.status_code == 200
    (record,) = m.metrics.requests
    assert (record.model, record.alias, record.outcome, record.status_code) == (
        "a",
        "default",
        RequestOutcome.OK,
        200,
    )
    assert (record.prompt_tokens, record.generated_tokens) == (7, 3)
    assert record.ttft_s is None, "a non-streaming answer has no first token to time"
    assert record.seconds >= 0


async def test_a_stream_is_timed_per_token_and_counted_from_the_engines_usage_report() -> None:
    async with metered(script=STREAM) as m:
        response = await m.client.post("/v1/chat/completions", json={**CHAT, "stream": True})
    assert response.status_code == 200
    ((_, _, parsed),) = m.backend.calls
    assert parsed.body["stream_options"] == {"include_usage": True}
    # The client did not ask for the usage report, so it never sees it.
    assert '"usage"' not in response.text
    assert response.text.endswith("data: [DONE]\n\n")
    (record,) = m.metrics.requests
    assert record.outcome is RequestOutcome.OK
    assert (record.prompt_tokens, record.generated_tokens) == (7, 3)
    assert record.ttft_s is not None and record.ttft_s <= record.seconds
    assert len(record.inter_token_s) == 2, "three tokens have two gaps"


async def test_a_client_that_asked_for_usage_still_gets_it() -> None:
    async with metered(script=STREAM) as m:
        body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
        response = await m.client.post("/v1/chat/completions", json=body)
    assert '"usage"' in response.text
    assert m.metrics.requests[0].generated_tokens == 3


async def test_a_stream_that_breaks_is_recorded_as_a_stream_error() -> None:
    broken = yields(token("a"), then=RuntimeError("engine died"))
    async with metered(script=broken) as m:
        await m.client.post("/v1/chat/completions", json={**CHAT, "stream": True})
    (record,) = m.metrics.requests
    assert (record.outcome, record.status_code) == (RequestOutcome.STREAM_ERROR, 200)


async def test_refusals_never_use_the_requested_name_as_a_label() -> None:
    async with metered(api_keys=["k"]) as m:
        unauthorized = await m.client.post("/v1/chat/completions", json=CHAT)
        unknown = await m.client.post(
            "/v1/chat/completions",
            json={**CHAT, "model": "no-such-model-123"},
            headers={"Authorization": "Bearer k"},
        )
    assert (unauthorized.status_code, unknown.status_code) == (401, 404)
    assert [(r.model, r.outcome, r.status_code) for r in m.metrics.requests] == [
        (NO_MODEL, RequestOutcome.CLIENT_ERROR, 401),
        (NO_MODEL, RequestOutcome.CLIENT_ERROR, 404),
    ]


async def test_in_flight_requests_are_reported_per_model() -> None:
    gate = asyncio.Event()

    async def slow(*_: Any) -> AsyncIterator[Any]:
        await gate.wait()
        yield FakeResponse({"object": "chat.completion"})

    async with metered(script=slow) as m:
        request = asyncio.create_task(m.client.post("/v1/chat/completions", json=CHAT))
        await wait_until_async(lambda: m.metrics.in_flight_now == {"a": 1})
        gate.set()
        await request
        await wait_until_async(lambda: m.metrics.in_flight_now == {})


async def test_a_held_request_is_counted_while_held_and_its_wait_recorded_once_released() -> None:
    before, after = swap_tables()
    async with metered(before) as m:
        request = asyncio.create_task(
            m.client.post("/v1/chat/completions", json={**CHAT, "model": "default"})
        )
        await wait_until_async(lambda: m.metrics.held_now == {"default": 1})
        m.registry.publish(after)
        assert (await request).status_code == 200
        await wait_until_async(lambda: m.metrics.held_now == {})
    ((alias, outcome, seconds, cause),) = m.metrics.holds
    assert (alias, outcome, cause) == ("default", HoldOutcome.RELEASED, HoldCause.SWAP)
    assert seconds >= 0
    assert m.metrics.requests[0].model == "b"


async def test_a_hold_that_times_out_is_recorded_as_such() -> None:
    before, _ = swap_tables()
    async with metered(before, hold_timeout_s=0.05) as m:
        response = await m.client.post("/v1/chat/completions", json={**CHAT, "model": "default"})
    assert response.status_code == 503
    assert [h[:2] for h in m.metrics.holds] == [("default", HoldOutcome.TIMEOUT)]
    assert m.metrics.requests[0].outcome is RequestOutcome.UNAVAILABLE


def test_inter_token_gaps_are_sampled_one_in_n_across_requests() -> None:
    every, seen = 4, 0
    recorded: list[float] = []
    for request in ((0.1, 0.2, 0.3), (0.4,), (0.5, 0.6, 0.7, 0.8, 0.9)):
        chosen, seen = sampled_gaps(request, seen, every)
        recorded.extend(chosen)
    # The 1st, 5th and 9th gap overall: a short request still weighs by its gaps.
    assert recorded == [0.1, 0.5, 0.9]
    assert seen == 9


def test_sampling_every_gap_records_them_all() -> None:
    assert sampled_gaps((0.1, 0.2), 5, 1) == ((0.1, 0.2), 7)
