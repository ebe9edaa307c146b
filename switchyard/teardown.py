"""`switchyard down`: stop what `up` started, in bounded time, whatever state it is in.

A head `up` started here is stopped by its processes (found by its session directory):
everything of the stack (Serve, the gateway, the manager, engines) runs inside them, and no
Ray call is needed, so a half-dead head (GCS up, raylet gone) or one already gone cannot
make `down` hang. A joined cluster is left running; only Switchyard's part of it (Serve's
applications and our actors) is removed, by a child process with a deadline, so an
unreachable cluster is reported instead of waited on.

That child is `python -m cluster.startup.cluster_teardown ADDRESS`.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from cluster.fleet.journal import SNAPSHOT_FILE
from cluster.fleet.manager_settings import MANAGER_DIR
from cluster.startup.fault_tolerant_head import forget_store
from cluster.startup.head_supervisor import stop_supervisor
from cluster.startup.ray_runtime import LOCAL_HEAD_MARKER, local_head_state, stop_local_head

Report = Callable[[str], None]

STACK_FILE = "stack.json"
REMOTE_TEARDOWN_TIMEOUT_S = 60.0


def stack_down(
    state_dir: Path,
    address: str | None,
    report: Report,
    *,
    recorded_address: str | None = None,
) -> bool:
    """Stop the stack recorded in `state_dir` (or the cluster at `address`); clean the
    records. False when there was nothing to stop."""
    head = local_head_state(state_dir)
    ours = head.recorded and (address is None or address == recorded_address)
    if ours:
        report(head.describe())
        # First: the supervisor of a fault-tolerant head would start again what stops here.
        stop_supervisor(state_dir)
        if head.processes:
            stop_local_head(state_dir)
            report("stopped the local Ray head and everything it ran")
        problem = forget_store(state_dir)
        if problem is not None:
            report(problem)
    else:
        target = address or recorded_address
        if target is not None:
            remove_from_cluster(target, report)
    for stale in (
        state_dir / STACK_FILE,
        state_dir / LOCAL_HEAD_MARKER,
        # The fleet is gone: the next `up` starts from an empty desired state (the journal
        # of past operations stays for the record).
        state_dir / MANAGER_DIR / SNAPSHOT_FILE,
    ):
        stale.unlink(missing_ok=True)
    return ours or address is not None or recorded_address is not None


def remove_from_cluster(address: str, report: Report) -> None:
    """Serve's applications and Switchyard's actors off a cluster `up` joined, by a child
    process that gives up after REMOTE_TEARDOWN_TIMEOUT_S."""
    command = [sys.executable, "-m", "cluster.startup.cluster_teardown", address]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=REMOTE_TEARDOWN_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        report(
            f"could not reach {address} in {REMOTE_TEARDOWN_TIMEOUT_S:g} s; Switchyard's "
            "Serve applications there may still run (the record here is cleaned)"
        )
        return
    if done.returncode == 0:
        report(f"removed Switchyard's Serve applications and actors from {address}")
    else:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        report(f"could not reach {address}: {last[0]} (the record here is cleaned)")
