"""Head faults with real vLLM engines: the real stack runs a fault-tolerant head
(`up --gcs-store local`), so its engines and gateway run on the data node, a worker raylet
beside the head. Under load from 4 clients on `default` (a vLLM miniature), with the
supervisor running as it does in production (never paused):

- the head's `gcs_server` is SIGKILLed; the supervisor starts it again and `status`
  answers within 60 s;
- then the whole head (the GCS, the head's raylet, Serve's controller, the manager, the
  registry) is SIGKILLed; the supervisor starts it again (on this machine the engines
  hold both cores while it does), and `status` and `export` answer within 180 s;
- `/v1/models` lists the same models throughout, until an `add` of a second vLLM model
  succeeds, and a `swap` of that model succeeds after it;
- no request on the established route fails, and the engine serving `default` never
  restarts.

The operations are bounded: each exits within its own phases' time plus ANSWER_S (what a
command may wait on a control actor), and neither waits on the head once it is back.

Runs last on the real stack; it leaves `mini-llama-after-head-swapped` served beside the
models it found. Prints a `FIGURE` line for RELIABILITY.md.
"""

from __future__ import annotations

import json
import time

import psutil
import pytest

from cluster.clients.actor_calls import ANSWER_S
from cluster.startup.fault_tolerant_head import read_head_record
from tests.support import shared_stacks
from tests.support.head_faults import (
    answers_status,
    gcs_process,
    kill_whole_head,
    listed_models,
)
from tests.support.running_stack import RunningStack
from tests.support.status_load import StatusLoad, describe_failures
from tests.support.waiting import wait_until

API_KEY = shared_stacks.API_KEY
CLIENTS = 4
GCS_BACK_S = 60.0
HEAD_BACK_S = 180.0
OPERATION_LIMIT_S = 600.0
AFTER_HEAD = "mini-llama-after-head"
SWAPPED = "mini-llama-after-head-swapped"


@pytest.fixture(scope="module")
def stack(real_stack: RunningStack) -> RunningStack:
    return real_stack


def _raylet_of(proc: psutil.Process) -> psutil.Process:
    return next(p for p in proc.parents() if p.name() == "raylet")


def _timed(stack: RunningStack, *args: str) -> tuple[dict[str, object], float]:
    """Run an operation with `--json`; its result and the command's wall time."""
    started = time.monotonic()
    result = stack.cli(*args, "--json", timeout_s=OPERATION_LIMIT_S)
    took = time.monotonic() - started
    assert result.returncode == 0, (args, result.stdout[-3000:], result.stderr[-3000:])
    document: dict[str, object] = json.loads(result.stdout)
    return document, took


def _phases_s(document: dict[str, object]) -> float:
    phases = document["phase_seconds"]
    assert isinstance(phases, dict) and phases, document
    return float(sum(phases.values()))


def test_after_a_gcs_kill_and_the_whole_heads_loss_an_add_and_a_swap_complete(
    stack: RunningStack,
) -> None:
    serving = stack.default_model()
    engine = stack.engine_process(serving)
    assert "--head" not in _raylet_of(engine).cmdline(), "the vLLM engine runs on the head"
    listed = listed_models(stack)
    with StatusLoad(stack.base_url, "default", workers=CLIENTS, api_key=API_KEY) as load:
        wait_until(lambda: sum(o.ok for o in load.snapshot()) >= 4, 300)
        gcs = gcs_process(stack)
        gcs_killed_at = time.monotonic()
        gcs.kill()
        wait_until(lambda: answers_status(stack), GCS_BACK_S, 1, message="no status after GCS")
        gcs_back_s = time.monotonic() - gcs_killed_at
        assert listed_models(stack) == listed

        head_killed_at = time.monotonic()
        kill_whole_head(stack)

        def control_plane_back() -> bool:
            return answers_status(stack) and stack.cli("export", timeout_s=60).returncode == 0

        wait_until(control_plane_back, HEAD_BACK_S, 1, message="the head did not come back")
        head_back_s = time.monotonic() - head_killed_at
        assert listed_models(stack) == listed, "the models changed before the add"

        added, add_s = _timed(stack, "add", "miniature:llama", "--name", AFTER_HEAD)
        assert listed_models(stack) == listed | {AFTER_HEAD}
        swapped, swap_s = _timed(stack, "swap", AFTER_HEAD, "miniature:llama", "--name", SWAPPED)
        assert listed_models(stack) == listed | {SWAPPED}
        time.sleep(3)
    outcomes = load.stop()

    assert outcomes and all(o.ok for o in outcomes), describe_failures(outcomes)
    assert stack.engine_process(serving).pid == engine.pid, "the vLLM engine restarted"
    record = read_head_record(stack.state_dir)
    assert record is not None and not record.down_now()
    assert {o.process for o in record.outages} >= {"gcs_server", "head"}
    # Neither operation waited on the head: beyond its own phases, only the command's
    # start and its calls on the manager, each bounded by ANSWER_S.
    add_wait_s = add_s - _phases_s(added)
    swap_wait_s = swap_s - _phases_s(swapped)
    assert add_wait_s < ANSWER_S and swap_wait_s < ANSWER_S, (add_wait_s, swap_wait_s)
    during = [o for o in outcomes if gcs_killed_at < o.started < head_killed_at + head_back_s]
    print(
        f"\nFIGURE head-loss-vllm: status back {gcs_back_s:.1f} s after the GCS kill, "
        f"status and export back {head_back_s:.1f} s after the whole head's; then add "
        f"{add_s:.1f} s ({_phases_s(added):.1f} s of it its phases), swap {swap_s:.1f} s "
        f"({_phases_s(swapped):.1f} s); {len(outcomes)} requests from {CLIENTS} clients "
        f"({len(during)} during the outages), 0 failed; the vLLM engine never restarted"
    )
