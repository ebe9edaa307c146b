"""A count over the last 60 s, kept per whole second of wall-clock time.

Seconds are absolute (Unix time), so windows kept by gateway replicas on different nodes
line up when they are added together (`tenant_gate.py`, `registry/registry_actor.py`); clocks of one
cluster agree to well under a second.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

WINDOW_S = 60


class UsageWindow:
    def __init__(self) -> None:
        self._by_second: dict[int, int] = {}

    def add(self, now: float, amount: int = 1) -> None:
        if amount:
            second = int(now)
            self._by_second[second] = self._by_second.get(second, 0) + amount

    def seconds(self, now: float) -> dict[int, int]:
        """The counts still inside the window at `now`, by second (older ones forgotten)."""
        oldest = int(now) - WINDOW_S + 1
        for second in [s for s in self._by_second if s < oldest]:
            del self._by_second[second]
        return dict(self._by_second)

    def total(self, now: float) -> int:
        return sum(self.seconds(now).values())


def window_total(counts: Mapping[int, int], now: float) -> int:
    oldest = int(now) - WINDOW_S + 1
    return sum(n for s, n in counts.items() if s >= oldest)


def merged(*windows: Mapping[int, int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for window in windows:
        for second, n in window.items():
            out[second] = out.get(second, 0) + n
    return out


def retry_after_s(counts: Mapping[int, int], limit: int, now: float, needed: int = 1) -> int:
    """Whole seconds until the window's total leaves room for `needed` more under `limit`
    (at least 1: a client told 0 would retry at once into the same refusal)."""
    oldest = int(now) - WINDOW_S + 1
    live = sorted((s, n) for s, n in counts.items() if s >= oldest)
    total = sum(n for _, n in live)
    if total + needed <= limit:
        return 1
    for second, n in live:
        total -= n
        if total + needed <= limit:
            # `second` leaves the window once `now` reaches second + WINDOW_S.
            return max(1, math.ceil(second + WINDOW_S - now))
    return WINDOW_S  # more than a whole window's allowance: the longest honest hint


def as_pairs(counts: Mapping[int, int]) -> list[tuple[int, int]]:
    return sorted(counts.items())


def from_pairs(pairs: Iterable[tuple[int, int]]) -> dict[int, int]:
    return {int(s): int(n) for s, n in pairs}
