"""The fleet registry: the cluster's single source of truth for routes and aliases.

A plain class; `registry_actor()` turns it into a detached, named Ray actor so the gateway
replicas, `switchyard status` and the manager all see the same table. Readers long-poll
`wait_for_change`, so a new model or alias reaches every gateway replica at once without
redeploying the gateway.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from domain.model_state import ModelState
from domain.tenant_keys import TenantTable
from serve_apps.internals import head_node_resources
from serve_apps.registry.engine_endpoint import EngineEndpoint
from serve_apps.registry.routing_table import ModelRoute, RoutingTable
from serve_apps.tenants.tenant_gate import UsageDelta
from serve_apps.tenants.usage_book import TenantUsageBook

REGISTRY_ACTOR_NAME = "switchyard-registry"
SWITCHYARD_NAMESPACE = "switchyard"
ENDPOINTS_FACT = "endpoints"
"""The ingress nodes `up` deployed a gateway on: a list of `IngressNode.to_json()`
(`cluster/startup/ingress_nodes.py`). `status` lists them; engine replicas bind their direct port
where those gateways can reach it."""
_FORGET_REPORT_S = 60.0
"""A gateway replica silent this long is forgotten (its node died, or Serve replaced it):
`in_flight` already ignores it after `fresh_s`; this only bounds the table."""


class FleetRegistry:
    """Holds the current RoutingTable and facts about the stack (endpoint, dashboard)."""

    def __init__(self) -> None:
        self._table = RoutingTable()
        self._facts: dict[str, Any] = {}
        # gateway replica id -> (monotonic time, table version it has seen, in-flight counts)
        self._reports: dict[str, tuple[float, int, dict[str, int]]] = {}
        self._changed: asyncio.Condition | None = None
        # (app, replica id) -> (monotonic time of the last registration, endpoint)
        self._engine_endpoints: dict[tuple[str, str], tuple[float, EngineEndpoint]] = {}
        # The newest tenant table (`up --keys`, `keys reload`); None: the gateways keep the
        # one they were deployed with.
        self._tenants: TenantTable | None = None
        self._usage = TenantUsageBook()

    def _condition(self) -> asyncio.Condition:
        # Created on first use so it binds to the actor's running event loop.
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def _publish(self, table: RoutingTable) -> RoutingTable:
        condition = self._condition()
        async with condition:
            self._table = table
            condition.notify_all()
        return table

    async def table(self) -> RoutingTable:
        return self._table

    async def wait_for_change(self, known_version: int, timeout_s: float) -> RoutingTable:
        """Return as soon as the table's version differs from `known_version`, or at timeout."""
        condition = self._condition()
        async with condition:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    condition.wait_for(lambda: self._table.version != known_version), timeout_s
                )
            return self._table

    async def put_model(self, route: ModelRoute) -> RoutingTable:
        return await self._publish(self._table.with_model(route))

    async def set_state(
        self, name: str, state: ModelState, error: str | None = None
    ) -> RoutingTable:
        return await self._publish(self._table.with_state(name, state, error))

    async def remove_model(self, name: str, replaced_by: str | None = None) -> RoutingTable:
        return await self._publish(self._table.without_model(name, replaced_by))

    async def set_alias(self, alias: str, name: str) -> RoutingTable:
        return await self._publish(self._table.with_alias(alias, name))

    async def switch(
        self, route: ModelRoute, aliases: frozenset[str], replaced: str | None
    ) -> RoutingTable:
        return await self._publish(self._table.with_switch(route, aliases, replaced))

    async def set_held(self, aliases: frozenset[str], ends_at: float | None = None) -> RoutingTable:
        return await self._publish(self._table.with_held(aliases, ends_at))

    async def report_in_flight(self, replica: str, version: int, counts: dict[str, int]) -> None:
        """Each gateway replica (of every ingress node's gateway app) reports its in-flight
        requests per model app at least once a second; ids are random per replica."""
        now = time.monotonic()
        self._reports[replica] = (now, version, counts)
        gone = [r for r, (at, _, _) in self._reports.items() if now - at > _FORGET_REPORT_S]
        for stale in gone:
            del self._reports[stale]

    async def in_flight(self, app: str, min_version: int, fresh_s: float = 5.0) -> int | None:
        """Requests in flight for the Serve app `app` across live gateway replicas; None
        until every live replica has seen table version `min_version` (so none can still
        start one)."""
        now = time.monotonic()
        total = 0
        for at, version, counts in self._reports.values():
            if now - at > fresh_s:
                # A replica that stopped reporting is gone: with its node, or replaced.
                continue
            if version < min_version:
                return None
            total += counts.get(app, 0)
        return total

    async def register_engine_endpoint(self, endpoint: EngineEndpoint) -> None:
        """An engine replica's direct HTTP address; replicas register again on every health
        check, which keeps the entry fresh."""
        key = (endpoint.app_name, endpoint.replica_id)
        self._engine_endpoints[key] = (time.monotonic(), endpoint)

    async def unregister_engine_endpoint(self, app_name: str, replica_id: str) -> None:
        self._engine_endpoints.pop((app_name, replica_id), None)

    async def engine_endpoints(self) -> list[EngineEndpoint]:
        """Registered endpoints; expired ones are forgotten (their replica died without
        unregistering, or stopped passing health checks)."""
        now = time.monotonic()
        stale = [k for k, (at, e) in self._engine_endpoints.items() if e.expired(now - at)]
        for key in stale:
            del self._engine_endpoints[key]
        return [endpoint for _, endpoint in self._engine_endpoints.values()]

    async def set_tenants(self, table: TenantTable) -> int:
        """Publish a tenant table; an older one than the current is ignored. Returns the
        version in force."""
        if self._tenants is None or table.version > self._tenants.version:
            self._tenants = table
        return self._tenants.version

    async def tenants(self, known_version: int) -> TenantTable | None:
        """The tenant table if newer than `known_version`, else None (nothing to send)."""
        if self._tenants is None or self._tenants.version <= known_version:
            return None
        return self._tenants

    async def exchange_usage(
        self, replica: str, delta: UsageDelta
    ) -> dict[str, dict[str, dict[int, int]]]:
        """A gateway replica's usage since its last call in; the other replicas' out."""
        return self._usage.exchange(replica, delta, time.time())

    async def tenant_usage(self, limit: int = 10) -> list[dict[str, Any]]:
        """The top tenants over the last 60 s, for `status`."""
        return [u.to_json() for u in self._usage.top(time.time(), limit)]

    async def set_fact(self, key: str, value: Any) -> None:
        self._facts[key] = value

    async def facts(self) -> dict[str, Any]:
        return dict(self._facts)


def registry_actor(*, create: bool = True) -> Any:
    """The registry actor handle, created (detached) if it does not exist and `create`."""
    import ray

    actor_cls = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(FleetRegistry)
    if create:
        return actor_cls.options(
            name=REGISTRY_ACTOR_NAME,
            namespace=SWITCHYARD_NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
            max_concurrency=1000,
            # The table lives in memory: on a worker node it would be lost with that node
            # (a restarted registry starts empty and every model would 404). Same node as
            # the manager, which republishes it after its own restart.
            resources=head_node_resources(),
        ).remote()
    return ray.get_actor(REGISTRY_ACTOR_NAME, namespace=SWITCHYARD_NAMESPACE)
