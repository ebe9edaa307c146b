"""Which model applications have a running replica right now.

A model whose engine died keeps its Serve replica until the health check fails and Serve
replaces it; while there is no running replica, a handle call would wait for one. The
gateway consults this view so such requests get 503 + Retry-After at once, never a hang.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from serve_apps.loop_tasks import PeriodicRefresh

FetchRunning = Callable[[], Awaitable[Mapping[str, int]]]
"""-> running replica count per Serve application name."""


class ReplicaHealthView:
    def __init__(self, fetch: FetchRunning, *, period_s: float) -> None:
        empty: Mapping[str, int] = {}
        self._refresh = PeriodicRefresh(fetch, empty, period_s=period_s, what="replica health")

    @property
    def updated_at(self) -> float:
        """Event-loop time of the last successful refresh."""
        return self._refresh.updated_at

    def start(self) -> None:
        self._refresh.start()

    async def stop(self) -> None:
        await self._refresh.stop()

    def running(self, app_name: str) -> int | None:
        """Running replicas of `app_name`; None while unknown (never block on unknown)."""
        return self._refresh.value.get(app_name)
