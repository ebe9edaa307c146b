"""A gateway replica's live copy of the routing table, kept fresh by long-polling."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from serve_apps.loop_tasks import LoopTask
from serve_apps.registry.routing_table import RoutingTable

log = logging.getLogger(__name__)

FetchTable = Callable[[RoutingTable, float], Awaitable[RoutingTable | None]]
"""(the table held, timeout_s) -> the registry's table once it differs from it; None at
timeout or while the registry has no table it may publish (it restarted without state and
waits for the manager to rebuild it)."""


class RouteView:
    def __init__(self, fetch: FetchTable, *, poll_timeout_s: float = 10.0) -> None:
        self._fetch = fetch
        self._poll_timeout_s = poll_timeout_s
        self._table = RoutingTable(version=-1)
        self._changed = asyncio.Event()
        self.changed_at = 0.0
        """Event-loop time of the last table change."""
        self._loop = LoopTask(self._follow)

    @property
    def table(self) -> RoutingTable:
        return self._table

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _follow(self) -> None:
        while True:
            try:
                table = await self._fetch(self._table, self._poll_timeout_s)
            except asyncio.CancelledError:
                raise
            except Exception:
                # The registry restarts with the cluster's head; keep serving the last
                # table we know and retry, rather than failing requests meanwhile.
                log.exception("routing table refresh failed; retrying in 1 s")
                await asyncio.sleep(1.0)
                continue
            # Older or emptier tables are refused (RoutingTable.supersedes): the table held
            # keeps serving until the registry has one at least as new.
            if table is not None and table.supersedes(self._table):
                self._table = table
                self.changed_at = asyncio.get_running_loop().time()
                self._changed.set()
                self._changed = asyncio.Event()

    async def wait_for_change(self, timeout_s: float) -> bool:
        """Wait until the table changes; False on timeout."""
        event = self._changed
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def wait_loaded(self, timeout_s: float) -> bool:
        """Wait for the first table (requests before it would all look like 404s)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self._table.version < 0:
            remaining = deadline - loop.time()
            if remaining <= 0 or not await self.wait_for_change(remaining):
                return self._table.version >= 0
        return True
