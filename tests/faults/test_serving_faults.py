"""A killed engine on the serving path of the real stack (Ray, Serve, the gateway, vLLM CPU
engines), under load, bounded in time: requests sent after the kill complete or get 503 +
Retry-After at once, those in flight end with an answer or a clear error, and Serve
replaces the replica.

On the suite's real stack (tests/support/shared_stacks.py), killing the engine of whichever
model serves `default`; Serve's replacement leaves it serving. A killed gateway replica and
a short soak are test_gateway_faults.py. The test prints its figures (`FIGURE ...` lines)
for RELIABILITY.md.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support import shared_stacks
from tests.support.running_stack import RunningStack
from tests.support.status_load import StatusLoad, describe_failures, first_success_after
from tests.support.waiting import wait_until

GATEWAY_PROCESS = "ServeReplica:switchyard-gateway"
REPO_ROOT = Path(__file__).resolve().parents[2]
HANG_S = 90.0
"""No request may take longer than this: a fault must give an answer, never a hang. (A
request sent just before Serve's health check notices the dead engine can wait for that
check, up to about a minute on this 2-core machine.)"""
API_KEY = shared_stacks.API_KEY


@pytest.fixture(scope="module")
def stack(real_stack: RunningStack) -> RunningStack:
    return real_stack


def test_an_engine_killed_under_load_gives_503_or_completion_and_is_replaced(
    stack: RunningStack,
) -> None:
    serving = stack.default_model()
    old_engine = stack.engine_process(serving)
    with StatusLoad(stack.base_url, "default", workers=8, api_key=API_KEY) as load:
        wait_until(lambda: sum(o.ok for o in load.snapshot()) >= 8, 120)
        killed_at = time.monotonic()
        old_engine.kill()

        def recovered() -> bool:
            return first_success_after(load.snapshot(), killed_at + 1) is not None

        wait_until(recovered, 420, 1, message=lambda: describe_failures(load.snapshot())[-1500:])
        time.sleep(10)  # steady again: requests after recovery all succeed
    outcomes = load.stop()
    recovery_s = (first_success_after(outcomes, killed_at + 1) or 0) - killed_at

    assert all(not o.timed_out and o.seconds < HANG_S for o in outcomes), "a request hung"
    in_flight = [o for o in outcomes if o.started < killed_at < o.ended]
    after = [o for o in outcomes if o.started >= killed_at]
    for outcome in after:
        # Sent after the kill: completed, or refused at once with 503 + Retry-After
        # (non-streaming and streaming alike: the gateway checks before the first byte).
        if not outcome.ok:
            assert outcome.status == 503, outcome
            assert outcome.retry_after, outcome
            assert outcome.error, outcome
    for outcome in in_flight:
        # Killed mid-generation: an answer or a clear error, never silence.
        assert outcome.ok or outcome.error, outcome

    def replaced() -> bool:
        try:
            return stack.engine_process(serving).pid != old_engine.pid
        except LookupError:
            return False

    wait_until(replaced, 60, message="the replica was replaced by one with a new engine")
    late = [o for o in outcomes if o.started > killed_at + recovery_s + 2]
    assert late and all(o.ok for o in late), describe_failures(late)
    lost_in_flight = sum(1 for o in in_flight if not o.ok)
    refused = sum(1 for o in after if o.status == 503)
    slowest = max(outcomes, key=lambda o: o.seconds)
    print(
        f"\nslowest request: sent {slowest.started - killed_at:+.1f} s from the kill, "
        f"{slowest.seconds:.1f} s, status {slowest.status}, error {slowest.error}"
    )
    print(
        f"\nFIGURE engine-kill: recovery {recovery_s:.1f} s; {len(outcomes)} requests, "
        f"{lost_in_flight}/{len(in_flight)} in flight at the kill ended with an error, "
        f"{refused} later ones got 503 + Retry-After, 0 lost otherwise, "
        f"slowest {max(o.seconds for o in outcomes):.1f} s"
    )
