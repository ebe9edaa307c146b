"""Faults on the gateway, on the fake stack (two gateway replicas sharing the endpoint
port; real Ray, Serve, registry and manager; fake engine replicas: the gateway is the subject),
under load, each bounded in time: a killed gateway replica leaves the other one serving and is
replaced; a short soak with a hot swap in the middle (`python -m benchmarks run soak`) loses no
request.

The tests run in file order and leave the stack serving; the soak swaps the model serving
`default` for a Llama miniature named `mini-llama-soak`. Every test prints its figures
(`FIGURE ...` lines) for RELIABILITY.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.support import shared_stacks
from tests.support.running_stack import RunningStack, stack_env
from tests.support.status_load import StatusLoad, describe_failures
from tests.support.waiting import wait_until

GATEWAY_PROCESS = "ServeReplica:switchyard-gateway"
REPO_ROOT = Path(__file__).resolve().parents[2]
HANG_S = 90.0
"""No request may take longer than this: a fault must give an answer, never a hang. (A
request sent just before Serve's health check notices the dead engine can wait for that
check, up to about a minute on this 2-core machine.)"""
API_KEY = shared_stacks.API_KEY


SOAK_MODEL = "mini-llama-soak"


@pytest.fixture(scope="module")
def stack(fake_stack: RunningStack) -> RunningStack:
    return fake_stack


def _gateway_replicas(stack: RunningStack) -> list[psutil.Process]:
    found = []
    for proc in stack.processes():
        try:
            if GATEWAY_PROCESS in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found


def test_a_killed_gateway_replica_leaves_the_other_serving_and_is_replaced(
    stack: RunningStack,
) -> None:
    replicas = _gateway_replicas(stack)
    assert len(replicas) == 2, replicas
    victim = replicas[0]
    with StatusLoad(stack.base_url, "default", workers=8, api_key=API_KEY) as load:
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
    assert after and all(o.ok for o in after), describe_failures(after)
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
            "-m",
            "benchmarks",
            "run",
            "soak",
            "--url",
            stack.base_url,
            "--state-dir",
            str(stack.state_dir),
            "--duration-s",
            "30",
            "--concurrency",
            "16",
            "--request-timeout-s",
            "600",
            "--api-key",
            API_KEY,
            "--swap-old",
            stack.default_model(),
            "--swap-source",
            "miniature:llama",
            "--swap-name",
            SOAK_MODEL,
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
    assert report["answered_by"].get(SOAK_MODEL, 0) > 0
    memory = report["memory_mib"]
    assert memory["start"]["gateway_rss_mib"] > 0 and memory["start"]["manager_rss_mib"] > 0
    print(f"\nFIGURE soak-60s: {json.dumps({k: v for k, v in report.items() if k != 'swap'})}")
    print(f"FIGURE soak-60s swap: {report['swap']['seconds']} s")
