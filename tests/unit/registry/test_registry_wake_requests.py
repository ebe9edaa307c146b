"""The registry's wake mailbox: gateways note the parked models they hold requests for, the
manager takes them (a long poll). One note per model however many ask; only parked models."""

from __future__ import annotations

import asyncio

import pytest

from domain.model_state import ModelState
from serve_apps.registry.registry_actor import FleetRegistry
from serve_apps.registry.routing_table import ModelRoute

pytestmark = pytest.mark.unit


def _route(name: str, state: ModelState) -> ModelRoute:
    return ModelRoute(name, f"model-{name}-g1", f"model-{name}-g1:{name}", state)


def test_many_asks_for_a_parked_model_are_one_wake_request() -> None:
    async def scenario() -> tuple[list[str], list[str], list[str]]:
        registry = FleetRegistry()
        await registry.put_model(_route("parked", ModelState.PARKED))
        await registry.put_model(_route("serving", ModelState.READY))
        waiting = asyncio.create_task(registry.take_wake_requests(5.0))
        await asyncio.sleep(0)
        for _ in range(50):
            await registry.request_wake("parked")
        await registry.request_wake("serving")
        await registry.request_wake("unknown")
        first = await asyncio.wait_for(waiting, 1.0)
        second = await registry.take_wake_requests(0.01)
        await registry.request_wake("parked")
        third = await registry.take_wake_requests(0.01)
        return first, second, third

    first, second, third = asyncio.run(scenario())
    assert first == ["parked"]
    assert second == [], "taken once"
    assert third == ["parked"], "asked again, taken again"
