"""Losing the node that hosts a model, on a real multi-raylet cluster (ray.cluster_utils):
the manager marks the model DEGRADED and reports it (`status`, journal), the endpoint answers
503 + Retry-After meanwhile (never a hang), and once a node with a free accelerator slot
joins, Serve re-places the replica and the manager marks the model READY again.

The head has no accelerator slot, so the model can only live on the worker node that is
killed, and nothing can host it until the second worker joins ("when capacity allows").
The model runs on a fake engine replica (`up --fake-engines`): the subject is the node,
Serve's re-placement and the manager's health watch, and a fake replica is placed, lost and
re-placed exactly as a vLLM one (a killed vLLM engine is test_serving_faults.py).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.support.running_stack import cli_at, free_port
from tests.support.waiting import wait_until

# Run alone with: .venv/bin/pytest tests/faults/test_node_loss.py -s

SLOTS = "accel_slot"
KIMI = "mini-kimi-k2.5"
WORKER_CPUS = 4
HANG_S = 60.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from cluster.startup.ray_auth import apply_token_auth_default

    apply_token_auth_default()
    from ray.cluster_utils import Cluster

    test_cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 4, "include_dashboard": False},
    )
    test_cluster.add_node(num_cpus=WORKER_CPUS, resources={SLOTS: 1})
    test_cluster.wait_for_nodes()
    try:
        yield test_cluster
    finally:
        test_cluster.shutdown()


def _cli(state_dir: Path, *args: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    return cli_at(state_dir, *args, timeout_s=timeout_s)


@pytest.fixture(scope="module")
def stack(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    state_dir = tmp_path_factory.mktemp("node-loss-stack")
    port = free_port()
    up = _cli(
        state_dir,
        "up",
        "--detach",
        "--fake-engines",
        "--address",
        cluster.address,
        "--port",
        str(port),
    )
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield state_dir, port
    finally:
        _cli(state_dir, "down", timeout_s=300)


def _model_state(state_dir: Path) -> dict[str, Any]:
    status = _cli(state_dir, "status", "--json", timeout_s=120)
    assert status.returncode == 0, status.stdout + status.stderr
    # Ray's driver may print "(raylet) The node ... died" on stdout before the document
    # (a lost node is what this test is about); the JSON starts at the first "{" line.
    lines = status.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("{"))
    document = json.loads("\n".join(lines[first:]))
    models = {m["name"]: m for m in document["models"]}
    model: dict[str, Any] = models[KIMI]
    return model


def _ask(port: int) -> httpx.Response:
    body = {"model": "default", "prompt": "hi", "max_tokens": 2}
    return httpx.post(f"http://127.0.0.1:{port}/v1/completions", json=body, timeout=HANG_S)


def _refused_with_retry_after(port: int) -> bool:
    try:
        reply = _ask(port)
    except httpx.HTTPError:
        return False
    return reply.status_code == 503 and bool(reply.headers.get("Retry-After"))


def _answers(port: int) -> bool:
    try:
        return _ask(port).status_code == 200
    except httpx.HTTPError:
        return False


def _node_hosting(cluster: Any, command_prefix: str) -> tuple[Any, psutil.Process]:
    """The process whose command line starts with `command_prefix` under a worker raylet,
    and that worker node."""
    from ray._private import ray_constants

    raylets = {
        node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid: node
        for node in cluster.worker_nodes
    }
    for proc in psutil.process_iter(["cmdline"]):
        if not " ".join(proc.info["cmdline"] or []).startswith(command_prefix):
            continue
        for parent in proc.parents():
            if parent.pid in raylets:
                return raylets[parent.pid], proc
    raise LookupError(f"no {command_prefix} under a worker raylet")


def test_a_lost_node_degrades_its_model_until_a_new_node_lets_serve_re_place_it(
    cluster: Any, stack: tuple[Path, int]
) -> None:
    state_dir, port = stack
    assert _ask(port).status_code == 200
    node, engine = _node_hosting(cluster, f"ray::ServeReplica:model-{KIMI}-g")

    lost_at = time.monotonic()
    cluster.remove_node(node, allow_graceful=False)
    # A lost machine takes every process with it; here the replica could outlive its raylet
    # for a moment.
    with contextlib.suppress(psutil.NoSuchProcess):
        engine.kill()
    wait_until(lambda: _model_state(state_dir)["state"] == "degraded", 180, 2)
    degraded_after = time.monotonic() - lost_at
    model = _model_state(state_dir)
    print(f"\nstatus while degraded: {model}")
    # The gateway replica may have lived on the lost node too; once Serve has replaced it
    # (on the head), a request for the degraded model is refused at once, never held.
    wait_until(lambda: _refused_with_retry_after(port), 120, 2)
    journal = state_dir / "manager" / "journal.jsonl"
    events = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    assert any(e.get("event") == "health" and e.get("state") == "degraded" for e in events)

    # Capacity comes back: a new node with a free slot joins; Serve re-places the replica.
    joined_at = time.monotonic()
    cluster.add_node(num_cpus=WORKER_CPUS, resources={SLOTS: 1})
    wait_until(lambda: _model_state(state_dir)["state"] == "ready", 600, 3)
    wait_until(lambda: _answers(port), 120, 2)
    ready_after = time.monotonic() - joined_at
    events = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    health = [e["state"] for e in events if e.get("event") == "health"]
    assert health[-2:] == ["degraded", "ready"], health
    print(
        f"\nFIGURE node-loss: degraded after {degraded_after:.1f} s, "
        f"ready {ready_after:.1f} s after a node with capacity joined"
    )
