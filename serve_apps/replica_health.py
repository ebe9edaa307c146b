"""Which model applications have a running replica right now.

A model whose engine died keeps its Serve replica until the health check fails and Serve
replaces it; while there is no running replica, a handle call would wait for one. The
gateway consults this view so such requests get 503 + Retry-After at once, never a hang.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

log = logging.getLogger(__name__)

FetchRunning = Callable[[], Awaitable[Mapping[str, int]]]
"""-> running replica count per Serve application name."""


class ReplicaHealthView:
    def __init__(self, fetch: FetchRunning, *, period_s: float) -> None:
        self._fetch = fetch
        self._period_s = period_s
        self._running: Mapping[str, int] = {}
        self.updated_at = 0.0
        """Event-loop time of the last successful refresh."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._follow())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def running(self, app_name: str) -> int | None:
        """Running replicas of `app_name`; None while unknown (never block on unknown)."""
        return self._running.get(app_name)

    async def _follow(self) -> None:
        while True:
            try:
                self._running = dict(await self._fetch())
                self.updated_at = asyncio.get_running_loop().time()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("replica health refresh failed")
            await asyncio.sleep(self._period_s)
