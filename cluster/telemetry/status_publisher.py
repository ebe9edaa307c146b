"""The manager's part of the status document, and its publication to the registry.

`ManagerStatusSource.take` builds a `ManagerStatus` from the fleet engine, the live-figures
sampler and Ray's liveness. `status` over Ray asks for one with a fresh inventory; the
`StatusPublisher` thread sends one to the registry every few seconds, so the gateway's
`GET /switchyard/v1/status` answers from memory, with no Ray driver and no probe per call.

A published view re-probes the nodes only when the fleet changed (an operation started or
ended, a model moved) or its probe is older than `inventory_max_age_s`: a probe is one Ray
task per node.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from cluster.fleet.fleet_engine import FleetEngine
from domain.fleet_state import FleetState
from domain.status_report import (
    CapacitySide,
    ManagerStatus,
    MetricsStatus,
    ModelCapacityStatus,
    ModelResidencyStatus,
)

log = logging.getLogger(__name__)

Liveness = Callable[[], tuple[set[str], dict[str, int] | None]]
"""() -> (Ray node ids alive, running replicas per Serve app or None)."""


def residency_of(fleet: FleetState) -> dict[str, ModelResidencyStatus]:
    return {
        name: ModelResidencyStatus(
            residency=model.requested.residency.value,
            park_mode=model.requested.park_mode.value,
            last_wake_s=model.last_wake_s,
        )
        for name, model in fleet.models.items()
    }


def capacity_of(fleet: FleetState) -> dict[str, ModelCapacityStatus]:
    return {
        name: ModelCapacityStatus(
            predicted=CapacitySide(**known.predicted.model_dump()),
            observed=CapacitySide(**known.observed.model_dump()),
        )
        for name, known in fleet.capacity.items()
    }


class ManagerStatusSource:
    def __init__(
        self,
        engine: FleetEngine,
        *,
        address: str,
        live: Callable[[], MetricsStatus | None] = lambda: None,
        liveness: Liveness = lambda: (set(), None),
        inventory_max_age_s: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._engine = engine
        self._address = address
        self._live = live
        self._liveness = liveness
        self._max_age_s = inventory_max_age_s
        self._clock = clock
        self._inventory: tuple[Hashable, float, dict[str, Any]] | None = None
        self._lock = threading.Lock()

    def take(self, *, fresh_inventory: bool, probe_on_change: bool = True) -> ManagerStatus:
        """The manager's view now; the inventory probed now when `fresh_inventory`, else
        the last probe's unless the fleet changed since (and `probe_on_change`) or it is
        too old."""
        engine = self._engine
        operation = engine.current()
        fleet = engine.fleet()
        inventory, inventory_at = self._inventory_for(
            _fingerprint(operation.op_id if operation else None, fleet),
            fresh_inventory,
            probe_on_change,
        )
        alive, running = self._liveness()
        return ManagerStatus(
            address=self._address,
            published_at=self._clock(),
            inventory=inventory,
            inventory_at=inventory_at,
            operation=operation,
            live_metrics=self._live(),
            last_swap=engine.last_swap(),
            capacity=capacity_of(fleet),
            residency=residency_of(fleet),
            alive_nodes=sorted(alive),
            running_replicas=running,
            fleet=[model.requested for _, model in sorted(fleet.models.items())],
            fleet_aliases=dict(fleet.aliases),
        )

    def _inventory_for(
        self, fingerprint: Hashable, fresh: bool, probe_on_change: bool
    ) -> tuple[dict[str, Any], float]:
        with self._lock:
            known = self._inventory
            now = self._clock()
            if (
                fresh
                or known is None
                or (probe_on_change and known[0] != fingerprint)
                or now - known[1] > self._max_age_s
            ):
                known = (fingerprint, now, self._engine.inventory())
                self._inventory = known
            return known[2], known[1]


def _fingerprint(op_id: str | None, fleet: FleetState) -> Hashable:
    """What changes when the accelerators' use may have: the running operation and each
    model's generation and parking."""
    return (op_id, tuple(sorted((n, m.generation, m.parked) for n, m in fleet.models.items())))


class StatusPublisher:
    """Sends `source.take(fresh_inventory=False)` to `publish` every `period_s`."""

    def __init__(
        self,
        source: ManagerStatusSource,
        publish: Callable[[ManagerStatus], None],
        *,
        period_s: float = 2.0,
    ) -> None:
        self._source = source
        self._publish = publish
        self._period_s = period_s
        self._stop = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="status-publisher", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def publish_once(self) -> None:
        self._publish(self._source.take(fresh_inventory=False))

    def publish_soon(self) -> None:
        """Publish now, in a thread of its own, with the last probe's inventory: an
        operation's caller never waits for it (a probe is a Ray task per node); the next
        period probes again, the fleet having changed."""

        def publish() -> None:
            try:
                self._publish(self._source.take(fresh_inventory=False, probe_on_change=False))
            except Exception:
                log.warning("publishing the manager's status failed", exc_info=True)

        threading.Thread(target=publish, name="status-publish-now", daemon=True).start()

    def _publish_periodic(self) -> None:
        try:
            self.publish_once()
        except Exception:
            # The registry restarting with the head: the next period publishes again.
            log.warning("publishing the manager's status failed", exc_info=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._publish_periodic()
            self._stop.wait(self._period_s)
