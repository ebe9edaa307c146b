"""Faults on the serving path of a real stack (`switchyard up` with two gateway replicas
sharing the endpoint port, Ray, Serve, a vLLM CPU engine), under load, each bounded in time:
a killed engine, a killed gateway replica, then a short soak with a hot swap in the middle
(benchmarks/soak.py).

One stack for the module (an engine start is 30-110 s here); the tests run in file order and
each leaves the stack serving. Every test prints its figures (`FIGURE ...` lines) for
RELIABILITY.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.support.running_stack import RunningStack, stack_env
from tests.support.status_load import RequestOutcome, StatusLoad
from tests.support.waiting import wait_until

KIMI = "mini-kimi-k2.5"
LLAMA = "mini-llama"
GATEWAY_PROCESS = "ServeReplica:switchyard-gateway"
REPO_ROOT = Path(__file__).resolve().parents[2]
HANG_S = 90.0
"""No request may take longer than this: a fault must give an answer, never a hang. (A
request sent just before Serve's health check notices the dead engine can wait for that
check, up to about a minute on this 2-core machine.)"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = RunningStack.on_free_ports(tmp_path_factory.mktemp("faults-stack"))
    result = running.up("--gateway-replicas", "2", timeout_s=600)
    try:
        assert result.returncode == 0, result.stdout + result.stderr
        yield running
    finally:
        running.down()
        wait_until(lambda: not running.processes(), 60, message="Ray processes left behind")


def _gateway_replicas(stack: RunningStack) -> list[psutil.Process]:
    found = []
    for proc in stack.processes():
        try:
            if GATEWAY_PROCESS in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found


def _first_success_after(outcomes: list[RequestOutcome], moment: float) -> float | None:
    """End time of the first successful request sent after `moment`."""
    ends = [o.ended for o in outcomes if o.ok and o.started > moment]
    return min(ends) if ends else None


def _describe(outcomes: list[RequestOutcome]) -> str:
    return "; ".join(f"{o.status} {o.error}" for o in outcomes if not o.ok)[:2000]


def test_an_engine_killed_under_load_gives_503_or_completion_and_is_replaced(
    stack: RunningStack,
) -> None:
    old_engine = stack.engine_process(KIMI)
    with StatusLoad(stack.base_url, "default", workers=8) as load:
        wait_until(lambda: sum(o.ok for o in load.snapshot()) >= 8, 120)
        killed_at = time.monotonic()
        old_engine.kill()

        def recovered() -> bool:
            return _first_success_after(load.snapshot(), killed_at + 1) is not None

        wait_until(recovered, 420, 1, message=lambda: _describe(load.snapshot())[-1500:])
        time.sleep(10)  # steady again: requests after recovery all succeed
    outcomes = load.stop()
    recovery_s = (_first_success_after(outcomes, killed_at + 1) or 0) - killed_at

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
            return stack.engine_process(KIMI).pid != old_engine.pid
        except LookupError:
            return False

    wait_until(replaced, 60, message="the replica was replaced by one with a new engine")
    late = [o for o in outcomes if o.started > killed_at + recovery_s + 2]
    assert late and all(o.ok for o in late), _describe(late)
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


def test_a_killed_gateway_replica_leaves_the_other_serving_and_is_replaced(
    stack: RunningStack,
) -> None:
    replicas = _gateway_replicas(stack)
    assert len(replicas) == 2, replicas
    victim = replicas[0]
    with StatusLoad(stack.base_url, "default", workers=8) as load:
        wait_until(lambda: sum(o.ok for o in load.snapshot()) >= 8, 120)
        killed_at = time.monotonic()
        victim.kill()

        def replaced() -> bool:
            pids = {p.pid for p in _gateway_replicas(stack)}
            return len(pids) == 2 and victim.pid not in pids

        wait_until(replaced, 180, 0.5, message="Serve did not replace the killed replica")
        replaced_s = time.monotonic() - killed_at
        time.sleep(5)
    outcomes = load.stop()

    assert all(not o.timed_out and o.seconds < HANG_S for o in outcomes), "a request hung"
    failed = [o for o in outcomes if not o.ok]
    for outcome in failed:
        # Only requests the killed process held (in flight, or on its open connection) fail,
        # and with a status or a connection error, promptly.
        assert outcome.status is not None or outcome.error, outcome
        assert outcome.started < killed_at + 1.0, outcome
    # The other replica kept the port: everything sent after the kill was served, also
    # while Serve was still starting the replacement.
    after = [o for o in outcomes if o.started > killed_at + 1.0]
    assert after and all(o.ok for o in after), _describe(after)
    during = [o for o in after if o.started < killed_at + replaced_s]
    in_flight = [o for o in outcomes if o.started < killed_at < o.ended]
    statuses = sorted({str(o.status) for o in failed})
    print(
        f"\nFIGURE gateway-kill: replaced in {replaced_s:.1f} s; {len(outcomes)} requests, "
        f"{len(failed)} failed (statuses {statuses}; {len(in_flight)} were in flight at the "
        f"kill), {len(during)} sent while the replacement started all served, 0 hung, "
        f"slowest {max(o.seconds for o in outcomes):.1f} s"
    )


def test_a_short_soak_with_a_swap_loses_no_request(stack: RunningStack, tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    result = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "benchmarks" / "soak.py"),
            "--url",
            stack.base_url,
            "--state-dir",
            str(stack.state_dir),
            "--duration-s",
            "60",
            "--concurrency",
            "16",
            "--request-timeout-s",
            "600",
            "--swap-old",
            KIMI,
            "--swap-source",
            "miniature:llama",
            "--swap-name",
            LLAMA,
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=stack_env(stack.state_dir),
        check=False,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["swap"]["returncode"] == 0, report["swap"]
    assert report["errors"] == 0, report["error_kinds"]
    assert report["answered_by"].get(LLAMA, 0) > 0
    memory = report["memory_mib"]
    assert memory["start"]["gateway_rss_mib"] > 0 and memory["start"]["manager_rss_mib"] > 0
    print(f"\nFIGURE soak-60s: {json.dumps({k: v for k, v in report.items() if k != 'swap'})}")
    print(f"FIGURE soak-60s swap: {report['swap']['seconds']} s")
