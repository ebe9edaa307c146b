"""A GCS outage on a fault-tolerant head (`up --gcs-store local`: a Redis beside the head
keeps the GCS's tables, a supervisor restarts what dies), on the fake stack under load from
4 clients:

- the head's `gcs_server` is SIGKILLed; its supervisor is paused first (SIGSTOP), so the
  outage lasts long enough to try every fleet operation in it, then let go;
- requests on established routes keep completing throughout: 0 fail;
- every operation that changes the fleet (`add`, `swap`, `remove`, `alias`, `apply`,
  `keys reload`) exits non-zero within 10 s saying the head does not answer, and changes
  nothing; `status` says what it can still see (the head's record);
- once the supervisor has started the GCS again (same address, same store), within 60 s
  `status` answers, the manager (`export`) and `/v1/models` list the fleet unchanged, no
  engine or gateway process has restarted, and a swap succeeds;
- the GCS store's `redis-server` is SIGKILLed under load: the supervisor starts it again
  (and the GCS, which exits without its Redis), and 0 requests fail.

Not covered here: the loss of the whole head (docs/reliability.md says what happens), and
gateways and engines kept off the head.

This module runs last on the fake stack; it leaves `default` served by `mini-llama-after-
outage`. Prints a `FIGURE` line for RELIABILITY.md.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import psutil
import pytest

from cluster.startup.fault_tolerant_head import read_head_record
from tests.support import shared_stacks
from tests.support.running_stack import RunningStack
from tests.support.status_load import StatusLoad, describe_failures
from tests.support.waiting import wait_until

API_KEY = shared_stacks.API_KEY
AUTH = {"Authorization": f"Bearer {API_KEY}"}
CLIENTS = 4
FAIL_FAST_S = 10.0
BACK_WITHIN_S = 60.0
AFTER_OUTAGE = "mini-llama-after-outage"


@pytest.fixture(scope="module")
def stack(fake_stack: RunningStack) -> RunningStack:
    return fake_stack


def _pids(stack: RunningStack, marker: str) -> set[int]:
    found = set()
    for proc in stack.processes():
        try:
            if marker in " ".join(proc.cmdline()):
                found.add(proc.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def _gcs(stack: RunningStack) -> psutil.Process:
    for proc in stack.processes():
        try:
            if proc.name() == "gcs_server":
                return proc
        except psutil.NoSuchProcess:
            continue
    raise LookupError("no gcs_server in the stack's session")


def _listed(stack: RunningStack) -> set[str]:
    answer = httpx.get(f"{stack.base_url}/models", headers=AUTH, timeout=30)
    answer.raise_for_status()
    return {m["id"] for m in answer.json()["data"]}


def _operations(stack: RunningStack, serving: str, fleet_file: Path) -> list[tuple[str, ...]]:
    return [
        ("add", "miniature:llama", "--name", "never-added"),
        ("swap", serving, "miniature:llama", "--name", "never-swapped"),
        ("remove", serving),
        ("alias", "set", "never-aliased", serving),
        ("apply", "-f", str(fleet_file)),
        ("keys", "reload"),
    ]


def test_a_killed_gcs_is_restarted_while_the_data_plane_serves_and_operations_fail_fast(
    stack: RunningStack, tmp_path: Path
) -> None:
    record = read_head_record(stack.state_dir)
    assert record is not None and record.supervisor_pid is not None, "not a fault-tolerant head"
    supervisor = psutil.Process(record.supervisor_pid)
    serving = stack.default_model()
    exported = stack.cli("export")
    assert exported.returncode == 0, exported.stderr
    fleet_file = tmp_path / "fleet.yaml"
    fleet_file.write_text(exported.stdout)
    listed = _listed(stack)
    engines = _pids(stack, "ServeReplica:model-")
    gateways = _pids(stack, "ServeReplica:switchyard-gateway")
    assert engines and gateways
    gcs = _gcs(stack)

    refused: list[tuple[str, float]] = []
    with StatusLoad(stack.base_url, "default", workers=CLIENTS, api_key=API_KEY) as load:
        wait_until(lambda: sum(o.ok for o in load.snapshot()) >= 8, 120)
        supervisor.send_signal(signal.SIGSTOP)
        try:
            killed_at = time.monotonic()
            gcs.kill()
            gcs.wait(10)
            for args in _operations(stack, serving, fleet_file):
                started = time.monotonic()
                result = stack.cli(*args, timeout_s=60)
                took = time.monotonic() - started
                assert result.returncode == 3, (args, result.stdout, result.stderr)
                assert "does not answer" in result.stderr, (args, result.stderr)
                assert took < FAIL_FAST_S, (args, took)
                refused.append((args[0], took))
            status = stack.cli("status", timeout_s=60)
            assert status.returncode == 3, status.stdout + status.stderr
            assert "fault-tolerant" in status.stdout, status.stdout
            time.sleep(3)  # the data plane on its own a while longer
        finally:
            supervisor.send_signal(signal.SIGCONT)
        resumed_at = time.monotonic()

        def control_plane_back() -> bool:
            return stack.cli("status", "--json", timeout_s=60).returncode == 0

        wait_until(control_plane_back, BACK_WITHIN_S, 1, message="status did not answer again")
        back_s = time.monotonic() - resumed_at
        outage_s = time.monotonic() - killed_at
        time.sleep(3)
    outcomes = load.stop()

    assert outcomes and all(o.ok for o in outcomes), describe_failures(outcomes)
    during = [o for o in outcomes if killed_at < o.started < killed_at + outage_s]
    assert during, "no request was sent during the outage"
    after = stack.cli("export")
    assert after.returncode == 0 and after.stdout == exported.stdout, after.stderr
    assert _listed(stack) == listed
    assert _pids(stack, "ServeReplica:model-") == engines, "an engine process restarted"
    assert _pids(stack, "ServeReplica:switchyard-gateway") == gateways
    recovered = read_head_record(stack.state_dir)
    assert recovered is not None and recovered.last_recovered_at() is not None
    assert not recovered.down_now()
    assert os.path.exists(stack.state_dir / "head_supervisor.log")

    swap = stack.cli("swap", serving, "miniature:llama", "--name", AFTER_OUTAGE, timeout_s=600)
    assert swap.returncode == 0, swap.stdout + swap.stderr
    assert stack.default_model() == AFTER_OUTAGE
    slowest = max(took for _, took in refused)
    print(
        f"\nFIGURE gcs-outage: GCS down {outage_s:.1f} s (supervisor held {back_s:.1f} s "
        f"of it to the answering status); {len(outcomes)} requests from {CLIENTS} "
        f"clients, {len(during)} sent during the outage, 0 failed; {len(refused)} "
        f"operations refused, slowest in {slowest:.1f} s; control plane back "
        f"{back_s:.1f} s after the supervisor resumed; no engine restarted; a swap then "
        "succeeded"
    )


def test_a_redis_restart_under_steady_traffic_is_survived(stack: RunningStack) -> None:
    """Ray's GCS exits when its Redis is gone for more than a few seconds (ray PR #65298 is
    the open fix); the supervisor starts Redis again (its append-only file keeps every
    write), then the GCS if it died, and the data plane never notices."""
    record = read_head_record(stack.state_dir)
    assert record is not None and record.redis_pid is not None
    redis = psutil.Process(record.redis_pid)
    outages_before = len(record.outages)
    engines = _pids(stack, "ServeReplica:model-")
    with StatusLoad(stack.base_url, "default", workers=CLIENTS, api_key=API_KEY) as load:
        wait_until(lambda: sum(o.ok for o in load.snapshot()) >= 8, 120)
        killed_at = time.monotonic()
        redis.kill()

        def recovered() -> bool:
            now = read_head_record(stack.state_dir)
            return (
                now is not None
                and len(now.outages) > outages_before
                and not now.down_now()
                and stack.cli("status", "--json", timeout_s=60).returncode == 0
            )

        wait_until(recovered, BACK_WITHIN_S, 1, message="the head did not recover")
        back_s = time.monotonic() - killed_at
        time.sleep(3)
    outcomes = load.stop()

    assert outcomes and all(o.ok for o in outcomes), describe_failures(outcomes)
    assert _pids(stack, "ServeReplica:model-") == engines
    after = read_head_record(stack.state_dir)
    assert after is not None
    restarted = sorted({o.process for o in after.outages[outages_before:]})
    print(
        f"\nFIGURE redis-restart: back in {back_s:.1f} s (restarted: {', '.join(restarted)}); "
        f"{len(outcomes)} requests from {CLIENTS} clients, 0 failed"
    )
