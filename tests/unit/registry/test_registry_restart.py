"""A registry that restarts comes back with what it had: the routing table (same version and
epoch), the facts `up` set, the tenant table and the engine endpoints. One that finds no
saved state publishes nothing until the manager opens the rebuilt table, and a gateway never
takes an older or emptier table than the one it holds. (No Ray: the registry is a plain
class; its store here is a dict, on Ray it is the GCS's key-value store.)"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from domain.model_state import ModelState
from domain.tenant_keys import TenantTable
from serve_apps.registry.engine_endpoint import EngineEndpoint
from serve_apps.registry.registry_actor import FleetRegistry
from serve_apps.registry.route_view import RouteView
from serve_apps.registry.routing_table import ModelRoute, RoutingTable


@dataclass
class DictStore:
    values: dict[str, bytes] = field(default_factory=dict)
    failing: bool = False

    def get(self, key: str) -> bytes | None:
        return self.values.get(key)

    def put(self, key: str, value: bytes) -> None:
        if self.failing:
            raise TimeoutError("the GCS did not answer")
        self.values[key] = value

    def delete(self, key: str) -> None:
        self.values.pop(key, None)


def route(name: str, state: ModelState = ModelState.READY) -> ModelRoute:
    return ModelRoute(name, f"model-{name}-g1", f"model-{name}-g1:{name}", state)


async def opened(store: DictStore) -> FleetRegistry:
    registry = FleetRegistry(store)
    await registry.open_table()
    return registry


@pytest.mark.anyio
async def test_a_restarted_registry_has_its_table_facts_tenants_and_endpoints() -> None:
    store = DictStore()
    first = await opened(store)
    await first.put_model(route("kimi"))
    await first.set_alias("default", "kimi")
    await first.set_fact("endpoint", "http://127.0.0.1:8000")
    await first.set_tenants(TenantTable(version=3))
    endpoint = EngineEndpoint("model-kimi-g1", "r1", "http://127.0.0.1:9000", "t")
    await first.register_engine_endpoint(endpoint)
    await asyncio.sleep(0.6)  # endpoints are written behind
    before = await first.table()

    again = FleetRegistry(store)  # what Ray's restart of the actor runs

    assert again.restored
    after = await again.table()
    assert (after.version, after.epoch) == (before.version, before.epoch)
    assert after.models == before.models and after.aliases == {"default": "kimi"}
    assert await again.facts() == {"endpoint": "http://127.0.0.1:8000"}
    tenants = await again.tenants(0)
    assert tenants is not None and tenants.version == 3
    assert await again.engine_endpoints() == [endpoint]
    # Gateways that held it see no change: the long poll times out on the same table.
    assert await again.wait_for_change(after.version, 0.05, after.epoch) == after


@pytest.mark.anyio
async def test_a_change_is_saved_before_anyone_sees_it_and_a_failed_save_changes_nothing() -> None:
    store = DictStore()
    registry = await opened(store)
    await registry.put_model(route("kimi"))
    store.failing = True
    with pytest.raises(TimeoutError):
        await registry.put_model(route("minimax"))
    with pytest.raises(TimeoutError):
        await registry.set_fact("endpoint", "x")
    assert set((await registry.table()).models) == {"kimi"}
    assert await registry.facts() == {}
    store.failing = False
    assert set((await FleetRegistry(store).table()).models) == {"kimi"}


@pytest.mark.anyio
async def test_a_registry_without_saved_state_publishes_nothing_until_opened() -> None:
    registry = FleetRegistry(DictStore())
    assert not registry.restored and not await registry.is_open()
    # The manager rebuilds the table from its journal, one change at a time...
    await registry.put_model(route("kimi"))
    assert await registry.wait_for_change(-1, 0.05) is None
    # ...and only the whole table reaches the gateways.
    await registry.put_model(route("llama"))
    await registry.open_table()
    table = await registry.wait_for_change(-1, 0.05)
    assert table is not None and set(table.models) == {"kimi", "llama"}


@pytest.mark.anyio
async def test_the_open_state_itself_survives_a_restart() -> None:
    store = DictStore()
    FleetRegistry(store)  # starts shut, saves nothing yet
    assert not await FleetRegistry(store).is_open()
    await (await opened(store)).put_model(route("kimi"))
    assert await FleetRegistry(store).is_open()


@pytest.mark.anyio
async def test_in_flight_counts_wait_for_the_gateways_to_report_after_a_restart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    registry = FleetRegistry(DictStore())
    # A gateway it has not heard from yet may be streaming: "unknown", not 0.
    assert await registry.in_flight("model-kimi-g1", 0) is None
    now[0] += 1
    await registry.report_in_flight("gw-1", 0, {"model-kimi-g1": 2})
    now[0] += 5
    await registry.report_in_flight("gw-1", 0, {"model-kimi-g1": 2})
    assert await registry.in_flight("model-kimi-g1", 0) == 2


def test_a_gateway_takes_only_newer_tables_of_its_epoch_or_a_rebuilt_epoch() -> None:
    held = RoutingTable(version=7, epoch="a").with_model(route("kimi"))  # version 8
    older = RoutingTable(version=3, epoch="a")
    same = RoutingTable(version=8, epoch="a")
    newer = held.without_model("kimi")
    rebuilt = RoutingTable(version=2, epoch="b")
    assert not older.supersedes(held)
    assert not same.supersedes(held)
    assert newer.supersedes(held)  # emptier, but the manager's own change
    assert rebuilt.supersedes(held)
    assert held.supersedes(RoutingTable(version=-1))  # a gateway's first table


@pytest.mark.anyio
async def test_a_route_view_keeps_serving_its_table_through_a_registry_outage() -> None:
    held = RoutingTable(version=4, epoch="a").with_model(route("kimi"))
    answers: list[RoutingTable | Exception | None] = [
        held,
        RuntimeError("registry actor died"),
        None,  # restarted without state: nothing to publish yet
        RoutingTable(version=1, epoch="a"),  # a stale copy: refused
    ]
    seen: list[RoutingTable] = []

    async def fetch(known: RoutingTable, timeout_s: float) -> RoutingTable | None:
        seen.append(known)
        if not answers:
            await asyncio.sleep(timeout_s)
            return None
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    view = RouteView(fetch, poll_timeout_s=0.01)
    view.start()
    try:
        assert await view.wait_loaded(1.0)
        for _ in range(300):
            if not answers:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(1.1)  # past the retry after the failure
        assert not answers
        assert view.table == held
    finally:
        await view.stop()
