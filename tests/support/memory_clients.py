"""The control plane's clients in memory, for the commands' unit tests.

`MemoryManagerClient` answers from a real `FleetEngine` (over the in-memory cluster of
memory_cluster.py) and `MemoryRegistryClient` from a real `FleetRegistry` on an event loop of
its own: the commands meet the same manager and registry logic as on Ray, without Ray.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

from cluster.clients.manager_client import OnEvent
from cluster.clients.registry_client import RegistryView
from cluster.fleet.fleet_engine import FleetEngine
from cluster.fleet.fleet_plan import FleetPlan
from cluster.telemetry.status_publisher import ManagerStatusSource
from domain.fleet_file import FleetFile, FleetModelEntry
from domain.fleet_state import FleetState
from domain.operation import OperationResult
from domain.operation_request import OperationRequest
from domain.status_report import EndpointStatus, ManagerStatus
from domain.tenant_keys import TenantTable
from serve_apps.registry.engine_endpoint import EngineEndpoint
from serve_apps.registry.registry_actor import FleetRegistry
from serve_apps.registry.status_document import endpoint_statuses, recorded_endpoints

T = TypeVar("T")


class MemoryManagerClient:
    """`ManagerApi` on a fleet engine in this process."""

    def __init__(self, engine: FleetEngine) -> None:
        self.engine = engine
        self.dies_during: set[str] = set()
        """Operation kinds during which the manager 'dies': `run` answers None."""

    def identity(self) -> str:
        return "memory-manager"

    def run(
        self, request: OperationRequest, on_event: OnEvent | None = None
    ) -> OperationResult | None:
        if request.kind.value in self.dies_during:
            return None
        result = self.engine.run(request)
        if on_event is not None:
            for event in result.events:
                on_event(event)
        return result

    def fleet(self) -> FleetState:
        return self.engine.fleet()

    def plan_fleet(self, desired: FleetFile) -> FleetPlan:
        return self.engine.plan(desired)

    def export_fleet(self) -> list[FleetModelEntry]:
        return self.engine.export()

    def record_apply(self, record: Mapping[str, Any]) -> None:
        self.engine.record_apply(dict(record))

    def status(self) -> ManagerStatus:
        return ManagerStatusSource(self.engine, address="127.0.0.1:6379").take(fresh_inventory=True)


class MemoryRegistryClient:
    """`RegistryApi` on a fleet registry in this process. `alive_nodes` and
    `running_replicas` stand for Ray's node table and Serve's running replicas."""

    def __init__(
        self,
        registry: FleetRegistry | None = None,
        *,
        alive_nodes: frozenset[str] = frozenset(),
        running_replicas: dict[str, int] | None = None,
    ) -> None:
        self.registry = registry or FleetRegistry()
        self.alive_nodes = alive_nodes
        self.running_replicas = running_replicas
        self._loop = asyncio.new_event_loop()

    def call(self, call: Awaitable[T]) -> T:
        """Run one of the registry's coroutines (what the actor would run)."""
        return self._loop.run_until_complete(call)

    def close(self) -> None:
        self._loop.close()

    def view(self) -> RegistryView:
        registry = self.registry
        return RegistryView(
            table=self.call(registry.table()),
            facts=self.call(registry.facts()),
            tenants=self.call(registry.tenants(-1)),
            tenant_usage=self.call(registry.tenant_usage()),
        )

    def facts(self) -> dict[str, Any]:
        return self.call(self.registry.facts())

    def set_fact(self, key: str, value: Any) -> None:
        self.call(self.registry.set_fact(key, value))

    def set_tenants(self, table: TenantTable) -> int:
        return self.call(self.registry.set_tenants(table))

    def engine_endpoints(self) -> list[EngineEndpoint]:
        return self.call(self.registry.engine_endpoints())

    def ingress_endpoints(self, facts: Mapping[str, Any]) -> list[EndpointStatus]:
        return endpoint_statuses(
            recorded_endpoints(facts), set(self.alive_nodes), self.running_replicas
        )
