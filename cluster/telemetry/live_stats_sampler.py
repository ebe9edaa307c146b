"""The manager's own live figures: the gateways' counters scraped on a period, so
`switchyard status` answers at once instead of waiting out a two-scrape window.

Every `period_s` (Ray's agents export every 10 s), one scrape of every node's metrics agent
(the same series the dashboards chart); the figures are the rates between the last two.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from cluster.telemetry.live_stats import Scrape, between, scrape_agents
from cluster.telemetry.metrics_targets import scrape_targets
from domain.status_report import MetricsStatus, ModelLive

log = logging.getLogger(__name__)

MANAGER_SOURCE = "manager"
"""`metrics.source` in `status` when the figures are the manager's samples."""


class LiveStatsSampler:
    def __init__(
        self,
        sd_file: Callable[[], Path],
        *,
        period_s: float = 10.0,
        scrape: Callable[[Iterable[str]], Scrape] = scrape_agents,
    ) -> None:
        self._sd_file = sd_file
        self._period_s = period_s
        self._scrape = scrape
        self._last: tuple[Scrape, Scrape] | None = None
        self._previous: Scrape | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="live-stats", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample_once()
            except Exception:
                log.exception("sampling the gateways' counters failed; retrying")
            self._stop.wait(self._period_s)

    def sample_once(self) -> None:
        sd_file = self._sd_file()
        if not sd_file.exists():
            return  # Ray writes it once its metrics agents are up
        scrape = self._scrape(scrape_targets(sd_file))
        if self._previous is not None:
            self._last = (self._previous, scrape)
        self._previous = scrape

    def latest(self) -> MetricsStatus | None:
        """The rates between the last two scrapes; None before there are two."""
        last = self._last
        if last is None:
            return None
        first, second = last
        return MetricsStatus(
            prometheus_service_discovery_file=str(self._sd_file()),
            source=MANAGER_SOURCE,
            window_s=round(second.at - first.at, 3),
            models=[ModelLive.model_validate(s.to_json()) for s in between(first, second)],
        )

    @property
    def age_s(self) -> float | None:
        """Seconds since the newest scrape the figures use."""
        return None if self._last is None else time.monotonic() - self._last[1].at
