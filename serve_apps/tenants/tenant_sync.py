"""A gateway replica's exchange with the fleet registry about tenants, once a period.

Each round: take the registry's tenant table if it is newer (`switchyard keys reload`
publishes one there), then trade this replica's usage since the last round for the other
replicas' windows (`tenant_gate.py` explains why decisions never wait for this). A failed
round keeps the replica's counts for the next one, and the gate keeps deciding on the last
figures it had.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable

from domain.tenant_keys import TenantTable
from serve_apps.loop_tasks import PeriodicRefresh
from serve_apps.tenants.tenant_gate import RemoteUsage, TenantGate, UsageDelta

log = logging.getLogger(__name__)

FetchTenants = Callable[[int], Awaitable[TenantTable | None]]
"""(version this replica has) -> a newer table, or None."""
ExchangeUsage = Callable[[str, UsageDelta], Awaitable[RemoteUsage]]
"""(replica id, this replica's delta) -> the other replicas' windows."""


class TenantSync:
    def __init__(
        self,
        gate: TenantGate,
        fetch: FetchTenants,
        exchange: ExchangeUsage,
        *,
        period_s: float,
    ) -> None:
        self._gate = gate
        self._fetch = fetch
        self._exchange = exchange
        self._replica_id = uuid.uuid4().hex[:12]
        self._refresh = PeriodicRefresh(self.round, None, period_s=period_s, what="tenant exchange")

    def start(self) -> None:
        self._refresh.start()

    async def stop(self) -> None:
        await self._refresh.stop()

    async def round(self) -> None:
        table = await self._fetch(self._gate.table.version)
        if table is not None and self._gate.offer(table):
            # Names only: a key (or its digest) never goes to the log.
            log.info(
                "tenant table %d from %s: %s",
                table.version,
                table.source or "?",
                ", ".join(t.name for t in table.tenants) or "no keys (open)",
            )
        if not self._gate.enabled:
            return
        delta = self._gate.take_delta()
        if not delta and not self._gate.has_quotas:
            # Nothing to tell the registry, and no quota needs the others' counts: an idle
            # replica makes no call (one per second per replica, every second).
            return
        try:
            remote = await self._exchange(self._replica_id, delta)
        except BaseException:
            self._gate.restore_delta(delta)
            raise
        self._gate.set_remote(remote)
