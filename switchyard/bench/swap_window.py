"""What clients saw of a hot swap, computed from a steady load's request records alone, and
the swap's phases from the fleet manager's events, on one clock.

Definitions (all times are seconds on the records' perf_counter() clock, reported relative to
the first request's send time):

- **completion gap**: the longest time between two consecutive successful completions (last
  chunk) of any request; **first-token gap**: the same between consecutive first tokens.
  Under a steady load both stay near the per-request latency until the swap stalls them.
- **held request**: one answered by NEW that was sent before the aliases moved to NEW while
  they were held: before the `switching` phase's end, when the manager's `draining` phase
  (the hold's start) came before it. A make-before-break swap switches before it drains and
  holds nothing, so none is held there. Without the manager's phases (it died), one answered
  by NEW that was sent before NEW's first token reached any client.
- **affected request**: one that failed, or a held one.
- **unavailability**: from the first affected request's send time to the first token NEW
  sent to a client; None when NEW never answered.
- **held time** of a request: its time to first token, for every affected request answered
  by NEW (held in the gateway, then released to NEW).
- **server-side hold**: from the manager's `draining` phase start to its `switching` phase
  end (the aliases are held in the gateways for that long).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

from domain.operation import OperationEvent
from switchyard.bench.request_record import RequestRecord

HOLD_STARTS = "draining"
HOLD_ENDS = "switching"


@dataclass(frozen=True)
class PhaseSpan:
    phase: str
    start_s: float
    """Relative to the load's first send."""
    seconds: float


@dataclass(frozen=True)
class Gap:
    seconds: float
    from_s: float
    """Relative to the load's first send: the event that opened the gap."""


@dataclass(frozen=True)
class SwapWindow:
    requests: int
    succeeded: int
    failed: int
    answered_by: dict[str, int]
    """Successful requests per served model name."""
    longest_completion_gap: Gap | None
    longest_first_token_gap: Gap | None
    first_affected_send_s: float | None
    first_new_token_s: float | None
    unavailability_s: float | None
    held_requests: int
    longest_held_s: float | None
    mean_held_s: float | None
    server_hold_s: float | None
    phases: tuple[PhaseSpan, ...]
    errors: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def phase_spans(events: Sequence[OperationEvent], wall_offset_s: float) -> list[PhaseSpan]:
    """Phases from the manager's events: a phase's closing event carries `seconds` and is
    stamped (Unix `at`) when the phase ended. `wall_offset_s` is Unix minus perf_counter."""
    spans = []
    for event in events:
        seconds = event.seconds
        if seconds is None or not event.phase:
            continue
        end = event.at - wall_offset_s
        spans.append(PhaseSpan(event.phase, end - seconds, seconds))
    return spans


def longest_gap(times_s: Sequence[float]) -> Gap | None:
    ordered = sorted(times_s)
    if len(ordered) < 2:
        return None
    earlier, later = max(pairwise(ordered), key=lambda pair: pair[1] - pair[0])
    return Gap(later - earlier, earlier)


def swap_window(
    records: Sequence[RequestRecord],
    *,
    new_model: str,
    phases: Sequence[PhaseSpan] = (),
    max_errors: int = 5,
) -> SwapWindow:
    """`phases` must already be on the records' clock (see `phase_spans`); the result is
    relative to the first send."""
    origin = min((r.start_s for r in records), default=0.0)
    ok = [r for r in records if r.succeeded]
    answered_by: dict[str, int] = {}
    for record in ok:
        name = record.served_model or "?"
        answered_by[name] = answered_by.get(name, 0) + 1
    on_new = [r for r in ok if r.served_model == new_model]
    first_new = min((r.chunk_times_s[0] for r in on_new), default=None)
    failed = [r for r in records if not r.succeeded]
    held_until = _hold_end(phases) if phases else first_new
    held = [r for r in on_new if held_until is not None and r.start_s < held_until]
    affected = [r.start_s for r in failed] + [r.start_s for r in held]
    first_affected = min(affected, default=None)
    unavailability = None
    if first_new is not None:
        unavailability = first_new - first_affected if first_affected is not None else 0.0
    held_s = [r.chunk_times_s[0] - r.start_s for r in held]
    errors: list[str] = []
    for record in failed:
        if record.error and record.error not in errors and len(errors) < max_errors:
            errors.append(record.error)

    def shifted(gap: Gap | None) -> Gap | None:
        return None if gap is None else Gap(gap.seconds, gap.from_s - origin)

    spans = tuple(PhaseSpan(p.phase, p.start_s - origin, p.seconds) for p in phases)
    return SwapWindow(
        requests=len(records),
        succeeded=len(ok),
        failed=len(failed),
        answered_by=answered_by,
        longest_completion_gap=shifted(longest_gap([r.chunk_times_s[-1] for r in ok])),
        longest_first_token_gap=shifted(longest_gap([r.chunk_times_s[0] for r in ok])),
        first_affected_send_s=None if first_affected is None else first_affected - origin,
        first_new_token_s=None if first_new is None else first_new - origin,
        unavailability_s=unavailability,
        held_requests=len(held),
        longest_held_s=max(held_s, default=None),
        mean_held_s=sum(held_s) / len(held_s) if held_s else None,
        server_hold_s=server_hold_s(spans),
        phases=spans,
        errors=tuple(errors),
    )


def _hold_end(phases: Sequence[PhaseSpan]) -> float | None:
    """When the held aliases moved to NEW; None when the swap held nothing."""
    starts = [p.start_s for p in phases if p.phase == HOLD_STARTS]
    ends = [p.start_s + p.seconds for p in phases if p.phase == HOLD_ENDS]
    if not starts or not ends or min(starts) >= max(ends):
        return None
    return max(ends)


def server_hold_s(phases: Sequence[PhaseSpan]) -> float | None:
    """From the drain's start to the switch's end: how long the aliases were held. A
    make-before-break swap switches before it drains, and holds nothing: 0."""
    starts = [p.start_s for p in phases if p.phase == HOLD_STARTS]
    ends = [p.start_s + p.seconds for p in phases if p.phase == HOLD_ENDS]
    if not starts or not ends:
        return None
    return max(max(ends) - min(starts), 0.0) if min(starts) < max(ends) else 0.0
