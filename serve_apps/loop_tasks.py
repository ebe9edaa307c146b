"""Background work of a replica on its own event loop: one coroutine run from `start()` to
`stop()` (`LoopTask`), and a value fetched again every `period_s` (`PeriodicRefresh`: the
gateway's views, the engine replica's idle gauges).

A failed fetch keeps the previous value (and is logged): a view never blocks or empties on a
transient error, and `updated_at` tells readers how fresh it is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class LoopTask:
    """Runs `run()` as a task from `start()` (once, however often it is called) until `stop()`."""

    def __init__(self, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._run = run
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None


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
