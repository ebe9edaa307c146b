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
    def __init__(
        self, fetch: FetchRunning, *, period_s: float, confirm: FetchRunning | None = None
    ) -> None:
        """`fetch`: the cheap count, polled (Serve's running-replica table); `confirm`: a
        fuller count asked only when an application the view had seen running drops to
        none. After a head restart Serve's controller lists the replicas it found alive as
        recovering, not running, for the seconds it takes to attach to them again: the
        cheap table would call them gone while they answer. `confirm` counts those."""
        empty: Mapping[str, int] = {}
        self._fetch = fetch
        self._confirm = confirm
        self._refresh = PeriodicRefresh(
            self._checked, empty, period_s=period_s, what="replica health"
        )

    async def _checked(self) -> Mapping[str, int]:
        counts = await self._fetch()
        if self._confirm is None:
            return counts
        dropped = [app for app, n in self._refresh.value.items() if n and not counts.get(app)]
        if not dropped:
            return counts
        confirmed = await self._confirm()
        return {**counts, **{app: confirmed.get(app, 0) for app in dropped}}

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
