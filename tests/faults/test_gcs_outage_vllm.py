"""A GCS outage with real vLLM engines: the real stack runs a fault-tolerant head too
(`up --gcs-store local`), so its engines and gateway run on the data node, a worker raylet
beside the head. Under load from 4 clients on `default` (a vLLM miniature), the head's
`gcs_server` is SIGKILLed and its supervisor starts it again: no request fails, no engine
process restarts, and `status` answers again within 60 s. The fake-engine version,
with fleet operations tried during the outage, is test_gcs_outage.py.

Runs last on the real stack and leaves it as it found it. Prints a `FIGURE` line for
RELIABILITY.md.
"""

from __future__ import annotations

import subprocess
import time

import psutil
import pytest

from tests.support import shared_stacks
from tests.support.running_stack import RunningStack
from tests.support.status_load import StatusLoad, describe_failures
from tests.support.waiting import wait_until

API_KEY = shared_stacks.API_KEY
CLIENTS = 4


@pytest.fixture(scope="module")
def stack(real_stack: RunningStack) -> RunningStack:
    return real_stack


def _raylet_of(proc: psutil.Process) -> psutil.Process:
    return next(p for p in proc.parents() if p.name() == "raylet")


def test_vllm_engines_keep_answering_through_a_gcs_restart(stack: RunningStack) -> None:
    serving = stack.default_model()
    engine = stack.engine_process(serving)
    assert "--head" not in _raylet_of(engine).cmdline(), "the vLLM engine runs on the head"
    gcs = next(p for p in stack.processes() if p.name() == "gcs_server")
    with StatusLoad(stack.base_url, "default", workers=CLIENTS, api_key=API_KEY) as load:
        wait_until(lambda: sum(o.ok for o in load.snapshot()) >= 4, 300)
        killed_at = time.monotonic()
        gcs.kill()

        def control_plane_back() -> bool:
            # A `status` started while the new GCS accepts connections but does not serve
            # yet can wait on Ray's reconnect: that attempt is not an answer, the next may be.
            try:
                return stack.cli("status", "--json", timeout_s=20).returncode == 0
            except subprocess.TimeoutExpired:
                return False

        wait_until(control_plane_back, 60, 1, message="status did not answer again")
        back_s = time.monotonic() - killed_at
        time.sleep(3)
    outcomes = load.stop()

    assert outcomes and all(o.ok for o in outcomes), describe_failures(outcomes)
    assert stack.engine_process(serving).pid == engine.pid, "the vLLM engine restarted"
    assert gcs.pid not in {p.pid for p in stack.processes() if p.name() == "gcs_server"}
    during = [o for o in outcomes if killed_at < o.started < killed_at + back_s]
    print(
        f"\nFIGURE gcs-outage-vllm: status back {back_s:.1f} s after the GCS kill; "
        f"{len(outcomes)} requests from {CLIENTS} clients ({len(during)} during), 0 failed; "
        "the vLLM engine never restarted"
    )
