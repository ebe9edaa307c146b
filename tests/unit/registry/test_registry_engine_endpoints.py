"""The fleet registry's directory of engine replicas' direct HTTP ports (no Ray: the registry
is a plain class that `registry_actor()` makes an actor)."""

from __future__ import annotations

import asyncio
import time

import pytest

from serve_apps.registry.engine_endpoint import EngineEndpoint
from serve_apps.registry.registry_actor import FleetRegistry


def endpoint(replica: str, app: str = "model-m") -> EngineEndpoint:
    return EngineEndpoint(app, replica, f"http://127.0.0.1:1{replica}", "t", refresh_period_s=5)


def test_endpoints_are_listed_refreshed_and_forgotten_after_three_missed_refreshes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    # The registry ages entries by time.monotonic(); nothing here sleeps or times out.
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    registry = FleetRegistry()

    async def scenario() -> None:
        await registry.register_engine_endpoint(endpoint("1"))
        await registry.register_engine_endpoint(endpoint("2"))
        now[0] += 20
        await registry.register_engine_endpoint(endpoint("2"))  # its health check passed
        assert {e.replica_id for e in await registry.engine_endpoints()} == {"1", "2"}
        now[0] += 6  # replica 1 last refreshed 26 s ago: 3 x 5 s + 10 s missed
        assert [e.replica_id for e in await registry.engine_endpoints()] == ["2"]
        await registry.unregister_engine_endpoint("model-m", "2")
        assert await registry.engine_endpoints() == []

    asyncio.run(scenario())


def test_a_replica_registering_again_replaces_its_entry() -> None:
    registry = FleetRegistry()

    async def scenario() -> list[EngineEndpoint]:
        await registry.register_engine_endpoint(endpoint("1"))
        moved = EngineEndpoint("model-m", "1", "http://127.0.0.1:2", "t2")
        await registry.register_engine_endpoint(moved)
        return await registry.engine_endpoints()

    assert [e.url for e in asyncio.run(scenario())] == ["http://127.0.0.1:2"]
