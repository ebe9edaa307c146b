"""Polling until a condition holds: one helper for sync tests, one for async tests.

Both check the condition at once, then every `interval_s`, and one last time at the deadline;
on time out they raise AssertionError with `message` (a string, or a callable evaluated at the
deadline for diagnostics that must be read then). On success they return True, so the older
spelling `assert wait_until(...)` keeps working.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Literal

Message = str | Callable[[], str] | None


def wait_until(
    condition: Callable[[], object],
    timeout_s: float,
    interval_s: float = 1.0,
    *,
    message: Message = None,
) -> Literal[True]:
    """Block until `condition()` is truthy. The default interval suits polling a running
    stack (a process scan or an HTTP call per try); in-process conditions pass a short one."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(_timed_out(message, timeout_s))
        time.sleep(min(interval_s, left))
    return True


async def wait_until_async(
    condition: Callable[[], object],
    timeout_s: float = 2.0,
    interval_s: float = 0.001,
    *,
    message: Message = None,
) -> Literal[True]:
    """`wait_until` for a test running on the event loop: yields to the loop between tries,
    so the tasks that make `condition` true can run. Defaults suit in-process state."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(_timed_out(message, timeout_s))
        await asyncio.sleep(min(interval_s, left))
    return True


def _timed_out(message: Message, timeout_s: float) -> str:
    what = message() if callable(message) else message
    return f"{what or 'condition not met'} (waited {timeout_s:g} s)"
