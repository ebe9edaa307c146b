"""A gateway replica's periodic report of its in-flight and held requests.

The gauges are set again on every round because Ray drops a gauge value that is not; the
manager gets the in-flight counts to know when a draining model has finished its last
request.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping

from serve_apps.gateway.gateway_metrics import GatewayMetrics
from serve_apps.loop_tasks import LoopTask
from serve_apps.registry.route_view import RouteView

log = logging.getLogger(__name__)

ReportInFlight = Callable[[str, int, dict[str, int], dict[str, int]], Awaitable[None]]
"""(replica id, routing table version seen, in-flight requests per Serve app, requests
forwarded per model since the replica started): lets the manager know when a draining
deployment has finished its last request, and when each model was last asked for."""

_REPORT_PERIOD_S = 0.2
_HEARTBEAT_S = 1.0
"""An unchanged report is sent again after this long: the registry trusts a report for 5 s
and Ray forgets a gauge not set for two export intervals (2 s in the suite). A change goes
out within `_REPORT_PERIOD_S`. Before, every report went out 5 times a second, the idle
gateway's largest CPU cost (the relay-capacity suite's idle figures, BENCHMARKS.md)."""


class InFlightReporter:
    """Reads `in_flight` (per model, and per app) and `held` (per alias), live views owned
    elsewhere."""

    def __init__(
        self,
        in_flight: Mapping[str, int],
        in_flight_by_app: Mapping[str, int],
        held: Mapping[str, int],
        routes: RouteView,
        metrics: GatewayMetrics,
        report: ReportInFlight | None,
        started: Mapping[str, int] | None = None,
    ) -> None:
        self._in_flight = in_flight
        self._in_flight_by_app = in_flight_by_app
        self._started = started if started is not None else {}
        self._held = held
        self._routes = routes
        self._metrics = metrics
        self._report = report
        self._replica_id = uuid.uuid4().hex[:12]
        self._loop = LoopTask(self._run)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _run(self) -> None:
        last: tuple[object, ...] | None = None
        sent_at = 0.0
        loop = asyncio.get_running_loop()
        while True:
            try:
                in_flight = {name: n for name, n in self._in_flight.items() if n}
                held = {a: n for a, n in self._held.items() if n}
                by_app = {app: n for app, n in self._in_flight_by_app.items() if n}
                started = dict(self._started)
                now = (in_flight, held, by_app, started, self._routes.table.version)
                if now != last or loop.time() - sent_at >= _HEARTBEAT_S:
                    self._metrics.in_flight(in_flight)
                    self._metrics.held(held)
                    if self._report is not None:
                        version = self._routes.table.version
                        await self._report(self._replica_id, version, by_app, started)
                    last, sent_at = now, loop.time()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("in-flight report failed")
            await asyncio.sleep(_REPORT_PERIOD_S)
