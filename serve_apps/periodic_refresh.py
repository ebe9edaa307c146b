"""A value fetched again every `period_s` on the caller's event loop (the gateway's views,
the engine replica's idle gauges).

A failed fetch keeps the previous value (and is logged): a view never blocks or empties on a
transient error, and `updated_at` tells readers how fresh it is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from serve_apps.loop_task import LoopTask

log = logging.getLogger(__name__)

T = TypeVar("T")


class PeriodicRefresh(Generic[T]):
    def __init__(
        self, fetch: Callable[[], Awaitable[T]], initial: T, *, period_s: float, what: str
    ) -> None:
        self._fetch = fetch
        self._period_s = period_s
        self._what = what
        self.value: T = initial
        self.updated_at = 0.0
        """Event-loop time of the last successful refresh (0: never)."""
        self._loop = LoopTask(self._follow)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _follow(self) -> None:
        while True:
            try:
                self.value = await self._fetch()
                self.updated_at = asyncio.get_running_loop().time()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s refresh failed", self._what)
            await asyncio.sleep(self._period_s)
