"""What clients saw of a swap, computed from synthetic timelines worked out by hand.

The timeline used throughout (seconds; the load's first send is at 100.0, so reported times
are relative to it):

    OLD answers:  a sent 100.0, tokens 100.5 .. 101.0
                  b sent 101.0, tokens 101.5 .. 102.0
                  c sent 102.0, tokens 102.5 .. 103.0   (sent before the drain, served by OLD)
    held:         d sent 103.0, first token 110.0 from NEW, ends 110.5
                  e sent 104.0, first token 110.2 from NEW, ends 110.8
    after:        f sent 111.0, first token 111.3 from NEW, ends 111.6

Unavailability = NEW's first token (110.0) - first affected send (d, 103.0) = 7.0 s.
"""

from __future__ import annotations

import pytest

from domain.operation import OperationEvent
from switchyard.bench.request_record import RequestRecord, failed_record
from switchyard.bench.swap_window import (
    Gap,
    PhaseSpan,
    longest_gap,
    phase_spans,
    server_hold_s,
    swap_window,
)

OLD, NEW = "mini-kimi-k2.5", "mini-minimax-m2.5"


def _req(sent: float, first: float, last: float, model: str) -> RequestRecord:
    return RequestRecord(
        start_s=sent, chunk_times_s=(first, last), completion_tokens=2, served_model=model
    )


A = _req(100.0, 100.5, 101.0, OLD)
B = _req(101.0, 101.5, 102.0, OLD)
C = _req(102.0, 102.5, 103.0, OLD)
D = _req(103.0, 110.0, 110.5, NEW)
E = _req(104.0, 110.2, 110.8, NEW)
F = _req(111.0, 111.3, 111.6, NEW)
HELD_SWAP = [A, B, C, D, E, F]


def _gap(gap: Gap | None) -> tuple[float, float]:
    assert gap is not None
    return (gap.seconds, gap.from_s)


def _span(span: PhaseSpan) -> tuple[float, float]:
    return (span.start_s, span.seconds)


def test_unavailability_runs_from_the_first_held_send_to_news_first_token() -> None:
    window = swap_window(HELD_SWAP, new_model=NEW)
    assert window.first_affected_send_s == pytest.approx(3.0)
    assert window.first_new_token_s == pytest.approx(10.0)
    assert window.unavailability_s == pytest.approx(7.0)


def test_held_requests_are_news_answers_sent_before_its_first_token() -> None:
    window = swap_window(HELD_SWAP, new_model=NEW)
    assert window.held_requests == 2  # d and e; f was sent after NEW answered
    assert window.longest_held_s == pytest.approx(7.0)  # d: 110.0 - 103.0
    assert window.mean_held_s == pytest.approx((7.0 + 6.2) / 2)


def test_the_longest_gaps_between_completions_and_between_first_tokens() -> None:
    window = swap_window(HELD_SWAP, new_model=NEW)
    # Completions 101, 102, 103, 110.5, 110.8, 111.6: the gap opens at c's end (103.0).
    assert _gap(window.longest_completion_gap) == pytest.approx((7.5, 3.0))
    # First tokens 100.5, 101.5, 102.5, 110.0, 110.2, 111.3: opens at c's first token.
    assert _gap(window.longest_first_token_gap) == pytest.approx((7.5, 2.5))


def test_counts_and_who_answered() -> None:
    window = swap_window(HELD_SWAP, new_model=NEW)
    assert (window.requests, window.succeeded, window.failed) == (6, 6, 0)
    assert window.answered_by == {OLD: 3, NEW: 3}
    assert window.errors == ()


def test_a_failed_request_opens_the_window_when_it_was_sent_first() -> None:
    refused = failed_record(102.5, "HTTP 503: mini-kimi-k2.5 is draining")
    window = swap_window([*HELD_SWAP, refused], new_model=NEW)
    assert window.first_affected_send_s == pytest.approx(2.5)
    assert window.unavailability_s == pytest.approx(7.5)  # 110.0 - 102.5
    assert (window.failed, window.held_requests) == (1, 2)
    assert window.errors == ("HTTP 503: mini-kimi-k2.5 is draining",)


def test_errors_are_distinct_and_bounded() -> None:
    failures = [failed_record(100.0 + i, f"HTTP 503: busy {i % 7}") for i in range(20)]
    window = swap_window([A, *failures], new_model=NEW, max_errors=5)
    assert window.failed == 20
    assert len(window.errors) == 5 and len(set(window.errors)) == 5


def test_without_an_answer_from_new_there_is_no_unavailability_figure() -> None:
    # A swap that rolled back: OLD answers again after the hold.
    rolled_back = [A, B, _req(103.0, 110.0, 110.5, OLD)]
    window = swap_window(rolled_back, new_model=NEW)
    assert window.first_new_token_s is None
    assert window.unavailability_s is None
    assert window.held_requests == 0
    assert _gap(window.longest_completion_gap) == pytest.approx((8.5, 2.0))


def test_no_records_gives_an_empty_window() -> None:
    window = swap_window([], new_model=NEW)
    assert window.requests == 0
    assert window.longest_completion_gap is None
    assert window.unavailability_s is None


def test_longest_gap_needs_two_events_and_ignores_order() -> None:
    assert longest_gap([]) is None
    assert longest_gap([5.0]) is None
    assert longest_gap([3.0, 1.0, 2.0, 7.0]) == Gap(4.0, 3.0)


# The manager's events for a swap that began at Unix 1_000_102.0 (perf_counter 102.0, so the
# wall offset is 1_000_000.0): a phase's closing event carries its duration and end time.
EVENTS = [
    OperationEvent.model_validate(e)
    for e in [
        {"at": 1_000_102.0, "phase": "preflight", "message": "admission", "seconds": None},
        {
            "at": 1_000_102.5,
            "phase": "preflight",
            "message": "preflight took 0.5 s",
            "seconds": 0.5,
        },
        {"at": 1_000_102.5, "phase": "draining", "message": "holding", "seconds": None},
        {"at": 1_000_103.5, "phase": "draining", "message": "draining took 1.0 s", "seconds": 1.0},
        {"at": 1_000_104.5, "phase": "removing_old", "message": "took 1.0 s", "seconds": 1.0},
        {"at": 1_000_109.5, "phase": "deploying_new", "message": "took 5.0 s", "seconds": 5.0},
        {"at": 1_000_109.8, "phase": "switching", "message": "took 0.3 s", "seconds": 0.3},
        {"at": 1_000_109.8, "phase": "", "message": "replaced", "seconds": None},
    ]
]


def test_phase_spans_come_from_the_closing_events_on_the_clients_clock() -> None:
    spans = phase_spans(EVENTS, wall_offset_s=1_000_000.0)
    assert [s.phase for s in spans] == [
        "preflight",
        "draining",
        "removing_old",
        "deploying_new",
        "switching",
    ]
    assert spans[0].phase == "preflight"
    assert _span(spans[0]) == pytest.approx((102.0, 0.5))
    assert spans[3].phase == "deploying_new"
    assert _span(spans[3]) == pytest.approx((104.5, 5.0))


def test_the_window_reports_phases_relative_to_the_first_send_and_the_server_hold() -> None:
    spans = phase_spans(EVENTS, wall_offset_s=1_000_000.0)
    window = swap_window(HELD_SWAP, new_model=NEW, phases=spans)
    assert window.phases[1].phase == "draining"
    assert _span(window.phases[1]) == pytest.approx((2.5, 1.0))
    # Held from draining's start (102.5) to switching's end (109.8).
    assert window.server_hold_s == pytest.approx(7.3)


def test_held_requests_are_those_sent_during_the_hold_when_the_phases_are_known() -> None:
    spans = phase_spans(EVENTS, wall_offset_s=1_000_000.0)
    late = _req(109.9, 110.1, 110.6, NEW)  # sent after the switch, before NEW's first token
    window = swap_window([*HELD_SWAP, late], new_model=NEW, phases=spans)
    assert window.held_requests == 2  # d and e, sent before switching ended (109.8)


def test_a_make_before_break_swap_holds_nothing() -> None:
    # The aliases move (switching) before OLD drains: nothing waits, even the first request
    # NEW answered, which was necessarily sent before NEW's first token.
    phases = [
        PhaseSpan("deploying_new", 100.5, 30.0),
        PhaseSpan("switching", 130.5, 0.0),
        PhaseSpan("draining", 130.5, 0.5),
        PhaseSpan("removing_old", 131.0, 1.0),
    ]
    records = [_req(100.0, 100.2, 100.4, OLD), _req(130.4, 130.6, 131.0, OLD)]
    records += [_req(130.6, 130.7, 131.0, NEW), _req(131.0, 131.1, 131.4, NEW)]
    window = swap_window(records, new_model=NEW, phases=phases)
    assert window.held_requests == 0
    assert window.failed == 0
    assert window.unavailability_s == 0.0
    assert window.server_hold_s == 0.0


def test_no_server_hold_without_both_ends() -> None:
    assert server_hold_s([PhaseSpan("draining", 1.0, 2.0)]) is None
    assert server_hold_s([]) is None


def test_the_json_form_is_plain_data() -> None:
    document = swap_window(HELD_SWAP, new_model=NEW).to_json()
    assert document["unavailability_s"] == pytest.approx(7.0)
    assert document["longest_completion_gap"]["seconds"] == pytest.approx(7.5)
    assert document["answered_by"] == {OLD: 3, NEW: 3}
