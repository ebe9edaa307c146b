"""One background coroutine of a gateway replica, on the running event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


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
