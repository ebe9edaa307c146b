"""When a model holds its accelerators: always, or only while it is asked for.

The per-model keys of the fleet file and of `add`/`swap` (`--residency`, ...): which models
the fleet parks and wakes by itself (cluster/fleet/residency.py, wake_on_request.py,
residency_watch.py), and how.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class Residency(StrEnum):
    """Whether the fleet may park a model by itself."""

    ALWAYS = "always"
    """Resident until an operator parks, swaps or removes it; never parked for room or when
    idle (the default: what every model did before models on demand)."""
    ON_DEMAND = "on_demand"
    """Parked after `park_after_idle_s` without a request, or to make room for another
    model's wake (least recently used first, never before `min_resident_s`); woken by the
    next request for it."""


class ParkMode(StrEnum):
    """How a parked model gives its accelerators back."""

    UNLOAD = "unload"
    """Its engine is removed; the next wake is a cold start."""
    SLEEP = "sleep"
    """vLLM's sleep mode (`sleep_level` 1 or 2, policies/sleep_mode.py): the engine process
    and its placement stay, and a wake needs no cold start. Admission refuses it where the
    platform has no sleep mode (the CPU engine) and, at level 1, where a node's host memory
    cannot pin the weights; docs/sleep-mode.md has the design and what is built of it."""


PARK_AFTER_IDLE_S = 600.0
"""Default for `park_after_idle_s`."""
MIN_RESIDENT_S = 60.0
"""Default for `min_resident_s`."""


@dataclass(frozen=True)
class ResidentModel:
    """One model as the fleet's residency rules see it."""

    name: str
    residency: Residency
    parked: bool
    park_after_idle_s: float
    min_resident_s: float
    idle_s: float
    """Seconds since a request last asked for it."""
    resident_s: float
    """Seconds since its engine last started (a start, a swap, a wake)."""
    asleep: bool = False
    """Parked by vLLM's sleep mode: its engine still holds its accelerators."""

    @property
    def parkable(self) -> bool:
        """On demand, holding accelerators (serving, or asleep), and resident long enough
        to be parked for room (an asleep model is then unloaded)."""
        return (
            self.residency is Residency.ON_DEMAND
            and (not self.parked or self.asleep)
            and self.resident_s >= self.min_resident_s
        )


def idle_to_park(models: Iterable[ResidentModel]) -> list[str]:
    """The on-demand models with no request for `park_after_idle_s`, counting from their
    last start when that is more recent (a model just woken is not idle yet)."""
    return sorted(
        m.name
        for m in models
        if m.residency is Residency.ON_DEMAND
        and not m.parked
        and min(m.idle_s, m.resident_s) >= m.park_after_idle_s
    )


def eviction_order(models: Iterable[ResidentModel], waking: str) -> list[str]:
    """Who may be parked to make room for `waking`: models asleep first (they serve
    nothing), then least recently used first; on-demand models resident for at least their
    `min_resident_s`; never an `always` model."""
    candidates = [m for m in models if m.name != waking and m.parkable]
    return [m.name for m in sorted(candidates, key=lambda m: (not m.asleep, -m.idle_s, m.name))]


class ParkReason(StrEnum):
    """Why a model was parked (the `reason` label of the parks counter)."""

    MANUAL = "manual"
    """`switchyard park`."""
    IDLE = "idle"
    """No request for its `park_after_idle_s`."""
    EVICTED = "evicted"
    """Parked to make room for another model's wake (least recently used first)."""


@dataclass(frozen=True)
class Demand:
    """What one model of a fleet asks of the accelerators."""

    name: str
    residency: Residency
    accelerators: int


def never_resident_together(demands: Iterable[Demand], accelerators: int) -> list[tuple[str, str]]:
    """Pairs of on-demand models that can never be resident at once: together they need
    more than the `accelerators` of the cluster that the `always` models leave. (A pair
    within that count may still not fit node by node; admission judges each wake.)"""
    demands = list(demands)
    room = accelerators - sum(d.accelerators for d in demands if d.residency is Residency.ALWAYS)
    on_demand = sorted(
        (d for d in demands if d.residency is Residency.ON_DEMAND), key=lambda d: d.name
    )
    return [
        (a.name, b.name)
        for i, a in enumerate(on_demand)
        for b in on_demand[i + 1 :]
        if a.accelerators + b.accelerators > room
    ]
