"""Waiting for the cluster to reach a state: one helper, with a clock tests can drive.

The fleet engine waits for in-flight requests to drain, for accelerators to be freed and
for Serve applications to run; each is a probe polled until it answers or a deadline
passes. The clock is a port so unit tests run those waits in no time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def wait_for(
    probe: Callable[[], T | None],
    *,
    timeout_s: float,
    poll_s: float,
    clock: Clock,
) -> T | None:
    """Poll `probe` until it returns something other than None (returned), or None once
    `timeout_s` has passed. The probe runs at least once, and once more at the deadline;
    an exception it raises ends the wait (a state that will never come)."""
    deadline = clock.monotonic() + timeout_s
    while True:
        found = probe()
        if found is not None:
            return found
        left = deadline - clock.monotonic()
        if left <= 0:
            return None
        clock.sleep(min(poll_s, left))
