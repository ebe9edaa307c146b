"""The OpenAI gateway, driven over ASGI: holds during swaps, in-flight accounting and the
model list."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from domain.model_state import ModelState
from serve_apps.gateway.gateway_metrics import HoldCause, HoldOutcome, RecordingGatewayMetrics
from serve_apps.registry.routing_table import ModelRoute
from serve_apps.relay.model_backend import Method
from tests.support.waiting import wait_until_async
from tests.unit.gateway.gateway_harness import (
    CHAT,
    Script,
    assert_unavailable,
    error_of,
    error_response,
    route,
    serving,
    swap_tables,
    table_of,
    yields,
)

pytestmark = pytest.mark.anyio

# ---------------------------------------------------------------- holds during swaps


async def test_a_held_alias_waits_and_is_forwarded_to_the_new_model() -> None:
    before, after = swap_tables()
    async with serving(before) as h:
        request = asyncio.create_task(h.chat({**CHAT, "model": "default"}))
        await wait_until_async(lambda: h.gateway.held == 1)
        assert not request.done()
        assert h.backend.calls == []
        h.registry.publish(after)
        response = await request
        assert h.gateway.held == 0
    assert response.status_code == 200, response.text
    ((sent_route, _, parsed),) = h.backend.calls
    assert sent_route.name == "b"
    assert parsed.body["model"] == "b"


async def test_a_table_change_that_keeps_the_hold_keeps_waiting() -> None:
    before, after = swap_tables()
    still_held = table_of(route("a"), aliases={"default": "a"}, held={"default"}, version=2)
    after = replace(after, version=3)
    async with serving(before) as h:
        request = asyncio.create_task(h.chat({**CHAT, "model": "default"}))
        await wait_until_async(lambda: h.gateway.held == 1)
        h.registry.publish(still_held)
        await wait_until_async(lambda: h.routes.table.version == 2)
        await asyncio.sleep(0.02)
        assert not request.done()
        h.registry.publish(after)
        response = await request
    assert response.status_code == 200
    assert h.backend.calls[0][0].name == "b"


# ---------------------------------------------------------------- holds on parked models


def _parked(**extra: Any) -> ModelRoute:
    return route("b", ModelState.PARKED, wake_s=2.0, **extra)


async def test_a_request_for_a_parked_model_asks_for_its_wake_and_is_forwarded_once_it_serves() -> (
    None
):
    parked = table_of(route("a"), _parked(), aliases={"small": "b"})
    metrics = RecordingGatewayMetrics()
    async with serving(parked, metrics=metrics) as h:
        request = asyncio.create_task(h.chat({**CHAT, "model": "small"}))
        await wait_until_async(lambda: h.gateway.held == 1)
        assert h.registry.wakes_asked == ["b"]
        waking = replace(parked.models["b"], state=ModelState.WAKING, ready_by=time.time() + 2)
        h.registry.publish(replace(parked.with_model(waking), version=5))
        await wait_until_async(lambda: h.routes.table.version == 5)
        assert not request.done(), "held while it wakes"
        woken = replace(route("b"), app_name="model-b-g2")
        h.registry.publish(replace(parked.with_model(woken), version=6))
        response = await request
    assert response.status_code == 200, response.text
    assert h.backend.calls[0][0].app_name == "model-b-g2"
    assert h.registry.wakes_asked == ["b"], "asked again only while it stays parked"
    assert [(a, o, c) for a, o, _, c in metrics.holds] == [
        ("small", HoldOutcome.RELEASED, HoldCause.WAKE)
    ]


async def test_a_wake_predicted_longer_than_the_hold_is_answered_at_once_and_still_asked_for() -> (
    None
):
    parked = table_of(route("a"), route("b", ModelState.PARKED, wake_s=90.0))
    async with serving(parked, hold_timeout_s=30) as h:
        response = await h.chat({**CHAT, "model": "b"})
        assert h.gateway.held == 0
    assert response.status_code == 503 and response.headers["retry-after"] == "90"
    assert "woken for about 90 s more" in error_of(response)["message"]
    assert h.registry.wakes_asked == ["b"]


async def test_a_wake_that_ends_without_serving_answers_the_held_requests_with_its_reason() -> None:
    parked = table_of(route("a"), _parked())
    async with serving(parked) as h:
        request = asyncio.create_task(h.chat({**CHAT, "model": "b"}))
        await wait_until_async(lambda: h.gateway.held == 1)
        refused = _parked(
            error="not admitted: no free accelerator",
            error_code="capacity_busy",
            wakes_ended=1,
        )
        h.registry.publish(replace(parked.with_model(refused), version=7))
        response = await request
    error = assert_unavailable(response)
    assert error["code"] == "capacity_busy"
    assert "could not be woken: not admitted" in error["message"]


async def test_a_held_request_is_refused_when_the_hold_queue_is_full() -> None:
    before, _ = swap_tables()
    async with serving(before, max_held_requests=0) as h:
        response = await h.chat({**CHAT, "model": "default"})
    assert "hold queue is full" in assert_unavailable(response)["message"]


async def test_a_held_request_gets_503_when_the_hold_times_out() -> None:
    before, _ = swap_tables()
    async with serving(before, hold_timeout_s=0.05, max_held_requests=1) as h:
        first = await h.chat({**CHAT, "model": "default"})
        # The timed-out request gave its place in the queue back.
        second = await h.chat({**CHAT, "model": "default"})
    for response in (first, second):
        assert "still being switched after 0.05 s" in assert_unavailable(response)["message"]
    assert h.backend.calls == []


async def test_a_hold_predicted_longer_than_the_bound_is_refused_at_once_with_its_time() -> None:
    before, _ = swap_tables()
    long_hold = replace(before, holds=dict.fromkeys(before.holds, time.time() + 120))
    async with serving(long_hold, hold_timeout_s=30) as h:
        response = await h.chat({**CHAT, "model": "default"})
        assert h.gateway.held == 0, "refused without waiting"
    assert response.status_code == 503, response.text
    error = error_of(response)
    assert error["type"] == "service_unavailable"
    assert "longer than this gateway holds requests (30 s)" in error["message"]
    assert 110 <= int(response.headers["retry-after"]) <= 120
    assert h.backend.calls == []


async def test_a_hold_predicted_within_the_bound_waits_as_usual() -> None:
    before, after = swap_tables()
    short_hold = replace(before, holds=dict.fromkeys(before.holds, time.time() + 5))
    async with serving(short_hold, hold_timeout_s=30) as h:
        pending = asyncio.create_task(h.chat({**CHAT, "model": "default"}))
        await wait_until_async(lambda: h.gateway.held == 1)
        h.registry.publish(after)
        response = await pending
    assert response.status_code == 200


async def test_a_hold_released_onto_a_loading_model_gets_503() -> None:
    before, _ = swap_tables()
    loading = table_of(
        route("a"), route("b", ModelState.LOADING), aliases={"default": "b"}, version=2
    )
    async with serving(before) as h:
        request = asyncio.create_task(h.chat({**CHAT, "model": "default"}))
        await wait_until_async(lambda: h.gateway.held == 1)
        h.registry.publish(loading)
        response = await request
    assert "'b' is loading" in assert_unavailable(response)["message"]


# ---------------------------------------------------------------- in-flight accounting


async def test_in_flight_returns_to_zero_after_a_non_streaming_request() -> None:
    async with serving() as h:
        assert (await h.chat(CHAT)).status_code == 200
        assert h.gateway.in_flight["a"] == 0


async def test_in_flight_counts_a_stream_until_it_ends() -> None:
    release = asyncio.Event()

    async def slow(route: ModelRoute, method: Method, request: Any) -> AsyncIterator[Any]:
        yield ['data: {"n": 1}\n\n']
        await release.wait()
        yield ["data: [DONE]\n\n"]

    async with serving(script=slow) as h:
        request = asyncio.create_task(h.chat({**CHAT, "stream": True}))
        await wait_until_async(lambda: h.gateway.in_flight["a"] == 1)
        release.set()
        response = await request
        assert response.status_code == 200
        assert h.gateway.in_flight["a"] == 0


@pytest.mark.parametrize(
    "script",
    [
        yields(['data: {"n": 1}\n\n'], then=RuntimeError("boom")),
        yields(then=RuntimeError("boom")),
        yields(error_response("bad", 400)),
        yields(),
    ],
    ids=["mid-stream", "before-first", "error-object", "empty"],
)
async def test_in_flight_returns_to_zero_after_failures(script: Script) -> None:
    async with serving(script=script) as h:
        await h.chat({**CHAT, "stream": True})
        await h.chat(CHAT)
        assert h.gateway.in_flight["a"] == 0


# ---------------------------------------------------------------- model list


async def test_the_model_list_shows_live_models_with_aliases_and_alias_entries() -> None:
    table = table_of(
        route("b", ModelState.LOADING, layout="TP2xPP1xDP1"),
        route("a", layout="TP1xPP1xDP1"),
        route("gone", ModelState.REMOVED, replaced_by="a"),
        aliases={"default": "a", "fast": "a", "big": "b"},
    )
    async with serving(table) as h:
        response = await h.client.get("/v1/models")
    assert response.status_code == 200
    listing = response.json()
    assert listing["object"] == "list"
    entries = {entry["id"]: entry for entry in listing["data"]}
    assert [entry["id"] for entry in listing["data"]] == ["a", "b", "big", "default", "fast"]
    assert entries["a"] == {
        "id": "a",
        "object": "model",
        "created": 0,
        "owned_by": "switchyard",
        "state": "ready",
        "aliases": ["default", "fast"],
        "layout": "TP1xPP1xDP1",
    }
    assert entries["b"]["state"] == "loading"
    assert entries["b"]["aliases"] == ["big"]
    assert entries["default"] == {
        "id": "default",
        "object": "model",
        "created": 0,
        "owned_by": "switchyard",
        "alias_for": "a",
    }
    assert "gone" not in entries


async def test_a_degraded_model_this_gateway_sees_running_again_is_served() -> None:
    # The manager's DEGRADED mark comes from its own poll of Serve and can lag a replica
    # Serve has already replaced: health this gateway saw after the mark overrides it.
    async with serving(table_of(route("a", ModelState.DEGRADED)), running={"model-a": 1}) as h:
        await asyncio.sleep(0.05)  # a few 10 ms health polls after the table loaded
        assert (await h.chat(CHAT)).status_code == 200


async def test_a_degraded_model_with_no_running_replica_is_still_refused() -> None:
    async with serving(table_of(route("a", ModelState.DEGRADED)), running={"model-a": 0}) as h:
        await asyncio.sleep(0.05)  # a few 10 ms health polls after the table loaded
        response = await h.chat(CHAT)
    assert "is degraded" in assert_unavailable(response)["message"]
