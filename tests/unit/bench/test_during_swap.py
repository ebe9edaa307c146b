"""A steady load through a (simulated) swap: the load keeps every client busy before, during
and after it, and the swap's hold shows up as held requests answered by NEW.

The server is an in-process fake; the swap is a plain function that holds the fake's
requests, renames the model it answers as, and returns an operation result shaped like the
fleet manager's. The real swap is exercised by tests/integration/test_bench_sweep.py.
"""

from __future__ import annotations

import time

import httpx
import pytest

from domain.operation import OperationEvent, OperationKind, OperationResult, Outcome
from switchyard.bench.client import Endpoint
from switchyard.bench.during_swap import EventSink, SwapCall, SwapLoadPlan, run_during_swap
from switchyard.bench.request_record import RequestRecord
from switchyard.bench.swap_report import swap_json, swap_table
from tests.unit.bench.fake_openai_server import FakeServer

HOLD_S = 0.4


class Seen:
    def __init__(self) -> None:
        self.records: list[RequestRecord] = []
        self.events: list[OperationEvent] = []

    def request_done(self, record: RequestRecord) -> None:
        self.records.append(record)

    def swap_event(self, event: OperationEvent) -> None:
        self.events.append(event)


def _swap_of(server: FakeServer) -> SwapCall:
    def swap(on_event: EventSink) -> OperationResult:
        events: list[OperationEvent] = []

        def phase(name: str, started: float) -> None:
            ended = time.time()
            event = OperationEvent(at=ended, phase=name, message=name, seconds=ended - started)
            events.append(event)
            on_event(event)

        started = time.time()
        server.held = True
        time.sleep(HOLD_S)
        phase("draining", started)
        started = time.time()
        server.model = "new"
        server.held = False
        phase("switching", started)
        return OperationResult(
            op_id="op1",
            kind=OperationKind.SWAP,
            outcome=Outcome.DONE,
            message="old replaced by new",
            phase_seconds={e.phase: e.seconds or 0.0 for e in events},
            events=events,
        )

    return swap


def _plan() -> SwapLoadPlan:
    return SwapLoadPlan(
        endpoint=Endpoint("http://bench.test/v1", "default"),
        prompts=("one", "two", "three"),
        prompt_tokens=(16, 16, 16),
        output_len=3,
        concurrency=3,
        new_model="new",
        delay_s=0.2,
        tail_s=0.2,
    )


@pytest.mark.anyio
async def test_the_hold_shows_as_held_requests_answered_by_new_and_nothing_fails() -> None:
    server = FakeServer(delay_s=0.005, model="old")
    seen = Seen()
    result = await run_during_swap(
        _plan(), _swap_of(server), seen, transport=httpx.ASGITransport(app=server.app())
    )
    window = result.window
    assert window.failed == 0
    assert window.answered_by["old"] > 0 and window.answered_by["new"] > 0
    assert 1 <= window.held_requests <= 3  # at most one per client
    assert window.unavailability_s is not None and window.unavailability_s >= HOLD_S * 0.9
    assert [p.phase for p in window.phases] == ["draining", "switching"]
    assert window.server_hold_s is not None and window.server_hold_s >= HOLD_S * 0.9
    # Every record reached the observer, and the manager's events too.
    assert len(seen.records) == len(result.load.records) == window.requests
    assert [e.phase for e in seen.events] == ["draining", "switching"]
    assert result.metrics.failed == 0 and result.metrics.output_tokens_per_s > 0
    assert server.max_in_flight <= 3


@pytest.mark.anyio
async def test_the_json_and_table_carry_the_swap_and_every_request() -> None:
    server = FakeServer(delay_s=0.005, model="old")
    result = await run_during_swap(
        _plan(), _swap_of(server), Seen(), transport=httpx.ASGITransport(app=server.app())
    )
    document = swap_json(result, config={"model": "default"})
    assert document["schema"] == "switchyard-bench-swap/1"
    assert document["swap"]["outcome"] == "done"
    assert set(document["swap"]["phase_seconds"]) == {"draining", "switching"}
    assert document["window"]["failed"] == 0
    sends = [r["sent_s"] for r in document["requests"]]
    assert sends == sorted(sends) and sends[0] == 0.0
    assert {r["served_model"] for r in document["requests"]} == {"old", "new"}
    table = swap_table(result, "t")
    assert table.row_count > 5


@pytest.mark.anyio
async def test_a_manager_that_died_is_reported_without_phases() -> None:
    server = FakeServer(delay_s=0.005, model="old")
    result = await run_during_swap(
        _plan(), lambda on_event: None, Seen(), transport=httpx.ASGITransport(app=server.app())
    )
    assert result.operation is None
    assert result.window.phases == ()
    assert result.window.unavailability_s is None
    assert swap_json(result, config={})["swap"] is None
