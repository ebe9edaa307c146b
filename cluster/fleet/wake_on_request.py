"""Wakes that requests ask for: the manager's half of a gateway's hold on a parked model.

The path, and why it holds up under load:

1. A gateway replica that resolves a request to a parked model holds the request (in its
   bounded hold queue, as during a swap) and notes the model in the fleet registry
   (`request_wake`: a set, so a burst of requests is one entry), once per routing-table
   change while the model stays parked. The held requests themselves never leave the
   gateway.
2. The manager long-polls the registry (`take_wake_requests`) on a thread of its own and,
   for each model still parked with no wake of it under way, starts one wake through the
   fleet engine's ordinary `run` on its own thread: journaled, admitted, waiting behind a
   change already running, exactly as `switchyard wake`.
3. The wake publishes WAKING (with when it expects to serve), then READY: the gateways see
   the table change and forward what they held. A wake that ends without serving (refused,
   failed) publishes PARKED with the reason and a grown `wakes_ended`, and the gateways
   answer what they held with 503 and that reason, at once.

So the manager does one unit of work per parked model however many clients wait, the
registry one set insert per gateway replica per table change, and nothing blocks a
gateway's event loop on the manager.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import Protocol

from cluster.fleet.ports import RoutePort
from domain.fleet_state import FleetState
from domain.operation import OperationResult
from domain.operation_request import OperationRequest, WakeRequest, WakeTrigger

log = logging.getLogger(__name__)

Spawn = Callable[[Callable[[], None]], None]


def spawn_thread(work: Callable[[], None]) -> None:
    threading.Thread(target=work, daemon=True, name="switchyard-wake").start()


class Fleet(Protocol):
    def fleet(self) -> FleetState: ...

    def run(self, request: OperationRequest) -> OperationResult: ...


class WakeOnRequest:
    def __init__(self, fleet: Fleet, routes: RoutePort, spawn: Spawn = spawn_thread) -> None:
        self._fleet = fleet
        self._routes = routes
        self._spawn = spawn
        self._lock = threading.Lock()
        self._waking: set[str] = set()

    def serve_once(self, timeout_s: float) -> list[str]:
        """Take the models gateways asked to wake (waiting up to `timeout_s` for one) and
        start a wake of each that is parked and not being woken; the names started."""
        started = []
        for name in self._routes.take_wake_requests(timeout_s):
            model = self._fleet.fleet().models.get(name)
            if model is None or not model.parked:
                continue
            with self._lock:
                if name in self._waking:
                    continue
                self._waking.add(name)
            started.append(name)
            self._spawn(partial(self._wake, name))
        return started

    def _wake(self, name: str) -> None:
        try:
            result = self._fleet.run(WakeRequest(name=name, trigger=WakeTrigger.REQUEST))
            log.info("wake of %s asked for by a request: %s", name, result.message)
        except Exception:
            log.exception("the wake of %s asked for by a request failed", name)
        finally:
            with self._lock:
                self._waking.discard(name)
