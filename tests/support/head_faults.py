"""Faults of a fault-tolerant head (`up --gcs-store local`), as the fault tests inflict
them, and what they read back: the GCS killed, the whole head lost, the models listed."""

from __future__ import annotations

import subprocess

import httpx
import psutil

from cluster.startup.fault_tolerant_head import read_head_record, surviving_head_processes
from tests.support.running_stack import RunningStack
from tests.support.shared_stacks import API_KEY


def gcs_process(stack: RunningStack) -> psutil.Process:
    for proc in stack.processes():
        try:
            if proc.name() == "gcs_server":
                return proc
        except psutil.NoSuchProcess:
            continue
    raise LookupError("no gcs_server in the stack's session")


def kill_gcs(stack: RunningStack) -> None:
    gcs = gcs_process(stack)
    gcs.kill()
    gcs.wait(10)


def kill_whole_head(stack: RunningStack) -> None:
    """SIGKILL to every process of the head, as the loss of its machine would do it: what
    `ray start --head` started (the record's `head_processes`: the GCS, the head's raylet,
    the dashboard, the monitors, Ray's client server) and everything those run (Serve's
    controller, the fleet manager, the registry). The data node's raylet and its replicas
    are left alone."""
    record = read_head_record(stack.state_dir)
    assert record is not None and record.head_processes
    doomed = surviving_head_processes(record)
    names = set()
    for proc in doomed:
        try:
            names.add(proc.name())
            proc.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(doomed, timeout=10)
    assert {"gcs_server", "raylet"} <= names, names
    assert not any("ServeReplica" in n for n in names), "a replica ran on the head"


def listed_models(stack: RunningStack) -> set[str]:
    """The model ids `/v1/models` lists (to the suite's key, which every shared stack takes)."""
    answer = httpx.get(
        f"{stack.base_url}/models", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30
    )
    answer.raise_for_status()
    return {m["id"] for m in answer.json()["data"]}


def answers_status(stack: RunningStack) -> bool:
    """`status --json` exits 0 (over Ray): the head and the manager answer. A `status`
    started while a new GCS accepts connections but does not serve yet can wait on Ray's
    reconnect: that attempt is not an answer, the next may be."""
    try:
        return stack.cli("status", "--json", timeout_s=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False
