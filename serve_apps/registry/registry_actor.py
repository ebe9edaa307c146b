"""The fleet registry: the cluster's single source of truth for routes and aliases.

A plain class; `registry_actor()` turns it into a detached, named Ray actor so the gateway
replicas, `switchyard status` and the manager all see the same table. Readers long-poll
`wait_for_change`, so a new model or alias reaches every gateway replica at once without
redeploying the gateway.

Its state survives its process (registry_snapshot.py): every change is written to the
store before it is published, and a restarted registry starts from the saved table, same
version and epoch, so the gateways see nothing happen. A registry that finds no saved state
publishes nothing until the manager has rebuilt the table from its journal and called
`open_table` (a table the gateways would take as "every model is gone" is never sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from domain.model_state import ModelState
from domain.status_report import ManagerStatus
from domain.tenant_keys import TenantTable
from serve_apps.internals import GcsKeyValue, head_node_resources
from serve_apps.registry.engine_endpoint import EngineEndpoint
from serve_apps.registry.registry_snapshot import SNAPSHOT_KEY, RegistrySnapshot, RegistryStore
from serve_apps.registry.routing_table import ModelRoute, RoutingTable
from serve_apps.registry.status_document import (
    endpoint_statuses,
    recorded_endpoints,
    status_report,
)
from serve_apps.tenants.tenant_gate import UsageDelta
from serve_apps.tenants.usage_book import TenantUsageBook

log = logging.getLogger(__name__)

REGISTRY_ACTOR_NAME = "switchyard-registry"
SWITCHYARD_NAMESPACE = "switchyard"
_STORE_TIMEOUT_S = 5.0
"""A write to the store waits at most this long: with the GCS away a fleet change fails
fast instead of hanging (the manager's operations fail with it, and change nothing)."""
_FORGET_REPORT_S = 60.0
"""A gateway replica silent this long is forgotten (its node died, or Serve replaced it):
`in_flight` already ignores it after `fresh_s`; this only bounds the table."""


class FleetRegistry:
    """Holds the current RoutingTable and facts about the stack (endpoint, dashboard).

    `store` None: nothing is kept beyond this object (unit tests of what reads it); such a
    registry starts open, as one restored from a snapshot does."""

    def __init__(self, store: RegistryStore | None = None) -> None:
        self._store = store
        self._facts: dict[str, Any] = {}
        # gateway replica id -> (monotonic time, table version it has seen, in-flight counts)
        self._reports: dict[str, tuple[float, int, dict[str, int]]] = {}
        self._started = time.monotonic()
        self._changed: asyncio.Condition | None = None
        self._writing: asyncio.Lock | None = None
        self._endpoints_saver: asyncio.Task[None] | None = None
        # (app, replica id) -> (monotonic time of the last registration, endpoint)
        self._engine_endpoints: dict[tuple[str, str], tuple[float, EngineEndpoint]] = {}
        # The newest tenant table (`up --keys`, `keys reload`); None: the gateways keep the
        # one they were deployed with.
        self._tenants: TenantTable | None = None
        self._usage = TenantUsageBook()
        # Parked models a gateway asked to wake, until the manager takes them; not saved: a
        # gateway still holding a request asks again on the next table change.
        self._wakes_wanted: set[str] = set()
        self._wake_asked: asyncio.Event | None = None
        # When each model was last asked for, by any gateway replica (monotonic; not saved:
        # after a restart the fleet counts from the restart).
        self._last_request: dict[str, float] = {}
        self._started_by_replica: dict[str, dict[str, int]] = {}
        # The manager's latest view for the gateway's status route; not saved: the manager
        # publishes again within seconds of either restarting.
        self._manager_status: ManagerStatus | None = None
        self._app_names: tuple[tuple[str, int], dict[str, str]] = (("", -2), {})
        saved = store.get(SNAPSHOT_KEY) if store is not None else None
        snapshot = RegistrySnapshot.decode(saved) if saved is not None else None
        self.restored = snapshot is not None
        """Whether this registry started from saved state (a restart), not empty."""
        if snapshot is None:
            self._table = RoutingTable(epoch=uuid.uuid4().hex[:12])
            self._open = store is None
            return
        self._table = snapshot.table
        self._open = snapshot.table_open
        self._facts = dict(snapshot.facts)
        self._tenants = snapshot.tenants
        now = time.monotonic()
        # Fresh as of now: a replica that no longer registers expires as it would have.
        for endpoint in snapshot.engine_endpoints:
            self._engine_endpoints[(endpoint.app_name, endpoint.replica_id)] = (now, endpoint)
        log.warning(
            "registry restored: table version %d (epoch %s), %d models, %d engine endpoints",
            self._table.version,
            self._table.epoch,
            len(self._table.live_models()),
            len(self._engine_endpoints),
        )

    def _condition(self) -> asyncio.Condition:
        # Created on first use so it binds to the actor's running event loop.
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    def _write_lock(self) -> asyncio.Lock:
        if self._writing is None:
            self._writing = asyncio.Lock()
        return self._writing

    def _snapshot(
        self,
        *,
        table: RoutingTable | None = None,
        table_open: bool | None = None,
        facts: dict[str, Any] | None = None,
        tenants: TenantTable | None = None,
    ) -> RegistrySnapshot:
        return RegistrySnapshot(
            table=self._table if table is None else table,
            table_open=self._open if table_open is None else table_open,
            facts=self._facts if facts is None else facts,
            tenants=self._tenants if tenants is None else tenants,
            engine_endpoints=tuple(e for _, e in self._engine_endpoints.values()),
        )

    async def _save(self, snapshot: RegistrySnapshot) -> None:
        """Write before publishing: what a gateway or the manager has seen survives a
        restart. Raises when the store does not answer in time (the change is not made)."""
        if self._store is None:
            return
        await asyncio.wait_for(
            asyncio.to_thread(self._store.put, SNAPSHOT_KEY, snapshot.encode()),
            _STORE_TIMEOUT_S + 1.0,
        )

    async def _publish(self, change: Callable[[RoutingTable], RoutingTable]) -> RoutingTable:
        async with self._write_lock():
            table = change(self._table)
            await self._save(self._snapshot(table=table))
            condition = self._condition()
            async with condition:
                self._table = table
                condition.notify_all()
            return table

    def _save_endpoints_soon(self) -> None:
        """Engine endpoints are written behind: a replica registers on every health check,
        which must not wait on (or fail with) the store; the set changes rarely."""
        if self._store is None or (
            self._endpoints_saver is not None and not self._endpoints_saver.done()
        ):
            return

        async def save() -> None:
            await asyncio.sleep(0.5)  # one write for a burst of registrations
            async with self._write_lock():
                try:
                    await self._save(self._snapshot())
                except Exception as exc:
                    log.warning("engine endpoints not saved (%r); they re-register anyway", exc)

        self._endpoints_saver = asyncio.get_running_loop().create_task(save())

    async def is_open(self) -> bool:
        """Whether gateways get this table: False only after a restart that found no saved
        state, until the manager has rebuilt the table and called `open_table`."""
        return self._open

    async def open_table(self) -> RoutingTable:
        """The manager's word that the table is whole: publish it to the gateways."""
        async with self._write_lock():
            if not self._open:
                await self._save(self._snapshot(table_open=True))
                condition = self._condition()
                async with condition:
                    self._open = True
                    condition.notify_all()
                log.warning("routing table opened at version %d", self._table.version)
            return self._table

    async def table(self) -> RoutingTable:
        return self._table

    async def wait_for_change(
        self, known_version: int, timeout_s: float, known_epoch: str = ""
    ) -> RoutingTable | None:
        """The table as soon as it differs from the caller's (`known_version` of
        `known_epoch`), or at timeout; None while the table is not open."""

        def changed() -> bool:
            table = self._table
            return self._open and (table.version != known_version or table.epoch != known_epoch)

        condition = self._condition()
        async with condition:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(condition.wait_for(changed), timeout_s)
            return self._table if self._open else None

    async def put_model(self, route: ModelRoute) -> RoutingTable:
        return await self._publish(lambda t: t.with_model(route))

    async def set_state(
        self, name: str, state: ModelState, error: str | None = None
    ) -> RoutingTable:
        return await self._publish(lambda t: t.with_state(name, state, error))

    async def remove_model(self, name: str, replaced_by: str | None = None) -> RoutingTable:
        return await self._publish(lambda t: t.without_model(name, replaced_by))

    async def set_alias(self, alias: str, name: str) -> RoutingTable:
        return await self._publish(lambda t: t.with_alias(alias, name))

    async def set_aliases(self, aliases: dict[str, str]) -> RoutingTable:
        return await self._publish(lambda t: t.with_aliases(aliases))

    async def switch(
        self, route: ModelRoute, aliases: frozenset[str], replaced: str | None
    ) -> RoutingTable:
        return await self._publish(lambda t: t.with_switch(route, aliases, replaced))

    async def hold(self, holds: dict[str, float | None]) -> RoutingTable:
        return await self._publish(lambda t: t.with_holds(holds))

    async def release(self, aliases: list[str] | None = None) -> RoutingTable:
        return await self._publish(lambda t: t.without_holds(aliases))

    async def report_in_flight(
        self,
        replica: str,
        version: int,
        counts: dict[str, int],
        started: dict[str, int] | None = None,
    ) -> None:
        """Each gateway replica (of every ingress node's gateway app) reports its in-flight
        requests per model app at least once a second, and the requests it has forwarded
        per model since it started; ids are random per replica."""
        now = time.monotonic()
        self._reports[replica] = (now, version, counts)
        seen = self._started_by_replica.get(replica, {})
        for name, total in (started or {}).items():
            if total > seen.get(name, 0):
                self._last_request[name] = now
        names = self._names_by_app()
        for app in counts:
            if app in names:
                self._last_request[names[app]] = now
        if started is not None:
            self._started_by_replica[replica] = dict(started)
        gone = [r for r, (at, _, _) in self._reports.items() if now - at > _FORGET_REPORT_S]
        for stale in gone:
            del self._reports[stale]
            self._started_by_replica.pop(stale, None)

    def _names_by_app(self) -> dict[str, str]:
        """Model name per Serve app of the current table, built once per table version:
        every gateway replica reports every second, and a scan per app would cost
        models x apps per report."""
        table = self._table
        if self._app_names[0] != (table.epoch, table.version):
            names = {route.app_name: route.name for route in table.models.values()}
            self._app_names = ((table.epoch, table.version), names)
        return self._app_names[1]

    async def in_flight(self, app: str, min_version: int, fresh_s: float = 5.0) -> int | None:
        """Requests in flight for the Serve app `app` across live gateway replicas; None
        until every live replica has seen table version `min_version` (so none can still
        start one). None also for `fresh_s` after this registry started: the reports were
        not saved, and a gateway it has not heard from yet may have requests in flight."""
        now = time.monotonic()
        if self._store is not None and now - self._started < fresh_s:
            return None
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
        known = self._engine_endpoints.get(key)
        self._engine_endpoints[key] = (time.monotonic(), endpoint)
        if known is None or known[1] != endpoint:
            self._save_endpoints_soon()

    async def unregister_engine_endpoint(self, app_name: str, replica_id: str) -> None:
        if self._engine_endpoints.pop((app_name, replica_id), None) is not None:
            self._save_endpoints_soon()

    async def engine_endpoints(self) -> list[EngineEndpoint]:
        """Registered endpoints; expired ones are forgotten (their replica died without
        unregistering, or stopped passing health checks)."""
        now = time.monotonic()
        stale = [k for k, (at, e) in self._engine_endpoints.items() if e.expired(now - at)]
        for key in stale:
            del self._engine_endpoints[key]
        return [endpoint for _, endpoint in self._engine_endpoints.values()]

    def _wake_event(self) -> asyncio.Event:
        if self._wake_asked is None:
            self._wake_asked = asyncio.Event()
        return self._wake_asked

    async def request_wake(self, name: str) -> None:
        """A gateway holds a request for parked `name`: note it for the manager (one note
        per model however many gateways ask)."""
        route = self._table.models.get(name)
        if route is None or route.state is not ModelState.PARKED:
            return
        self._wakes_wanted.add(name)
        self._wake_event().set()

    async def idle_seconds(self) -> dict[str, float]:
        """Per model: seconds since a gateway last forwarded a request for it (or had one
        in flight); models not asked for since this registry started count from its start."""
        now = time.monotonic()
        return {
            name: now - self._last_request.get(name, self._started) for name in self._table.models
        }

    async def take_wake_requests(self, timeout_s: float) -> list[str]:
        """The models gateways asked to wake since the last call, as soon as there is one,
        or none at timeout (the manager long-polls this)."""
        event = self._wake_event()
        if not self._wakes_wanted:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout_s)
        taken = sorted(self._wakes_wanted)
        self._wakes_wanted.clear()
        event.clear()
        return taken

    async def set_tenants(self, table: TenantTable) -> int:
        """Publish a tenant table; an older one than the current is ignored. Returns the
        version in force."""
        async with self._write_lock():
            if self._tenants is None or table.version > self._tenants.version:
                await self._save(self._snapshot(tenants=table))
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
        async with self._write_lock():
            facts = {**self._facts, key: value}
            await self._save(self._snapshot(facts=facts))
            self._facts = facts

    async def facts(self) -> dict[str, Any]:
        return dict(self._facts)

    async def set_manager_status(self, status: ManagerStatus) -> None:
        """The manager's view (inventory, operation, live figures, ...), published every
        few seconds for `status_document`."""
        self._manager_status = status

    async def status_document(self) -> dict[str, Any]:
        """The `status --json` document from this registry's state and the manager's last
        published view, as JSON (what the gateway's status route serves)."""
        manager = self._manager_status
        running = None if manager is None else manager.running_replicas
        alive = set() if manager is None else set(manager.alive_nodes)
        report = status_report(
            address=None,
            table=self._table,
            facts=self._facts,
            tenants=self._tenants,
            tenant_usage=[u.to_json() for u in self._usage.top(time.time(), 10)],
            manager=manager,
            endpoints=endpoint_statuses(recorded_endpoints(self._facts), alive, running),
            now=time.time(),
        )
        report.read_via = "gateway"
        document: dict[str, Any] = report.model_dump(mode="json")
        return document

    async def fleet_document(self) -> dict[str, Any] | None:
        """The live fleet as the manager last published it: each model's entry as asked
        for (only the keys it was given, as `export` prints them) and the aliases; None
        until the manager has published."""
        manager = self._manager_status
        if manager is None:
            return None
        return {
            "models": [e.model_dump(mode="json", exclude_unset=True) for e in manager.fleet],
            "aliases": dict(manager.fleet_aliases),
            "published_at": manager.published_at,
        }


def registry_actor(*, create: bool = True) -> Any:
    """The registry actor handle, created (detached) if it does not exist and `create`."""
    import ray

    actor_cls = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(FleetRegistry)
    if create:
        store = GcsKeyValue(SWITCHYARD_NAMESPACE, timeout_s=_STORE_TIMEOUT_S)
        return actor_cls.options(
            name=REGISTRY_ACTOR_NAME,
            namespace=SWITCHYARD_NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
            max_concurrency=1000,
            # Beside the GCS it saves its state in, and the manager that rebuilds it.
            resources=head_node_resources(),
        ).remote(store)
    return ray.get_actor(REGISTRY_ACTOR_NAME, namespace=SWITCHYARD_NAMESPACE)


def forget_registry_state() -> None:
    """Delete the registry's saved state (`down` on a cluster that keeps running: a later
    `up` there must start empty, not restore this stack's table)."""
    GcsKeyValue(SWITCHYARD_NAMESPACE, timeout_s=_STORE_TIMEOUT_S).delete(SNAPSHOT_KEY)
