"""The story at its scale on a simulated box: Kimi-K2.5 and MiniMax-M2.5 take turns on one
node of 8 GPUs, each parked by vLLM's sleep mode while the other serves.

A real Ray cluster (`ray.cluster_utils.Cluster`): a head for the control plane and a node on
127.0.0.2 declaring 8 logical `GPU`s, its inventory overridden as the story's box (8 x RTX
PRO 6000 on PCIe, 2 TB of host memory). `switchyard up --accelerator gpu --fake-engines`
runs the GPU path of placement and admission (bundles asking for `GPU`, the GPU profile, its
host links, the host-memory budget of level-1 sleep) with the fleet of
`benchmarks/sleep_story.py`: Kimi on all 8 GPUs (its miniature has 4 heads, so TP4 x PP2:
the same 8 ranks) and MiniMax TP4 + EP with `replicas: 2`, both `on_demand` with
`park_mode: sleep`. The engines are stand-ins implementing sleep and wake, their times the
story's scaled down (`SCALE`, printed).

Clients alternate between the two models' aliases, phase by phase; a phase's requests are
held while the manager puts the other model to sleep and wakes theirs. The figures of a
longer run are the benchmark's (`python -m benchmarks run sleep-story`, BENCHMARKS.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.on_demand import journal_since
from benchmarks.sleep_story import (
    FAKE_ENGINE,
    GPU_NODE_IP,
    STORY,
    fleet_file,
    inventory_file,
    placements,
    up_args,
    wake_rows,
)
from tests.support.running_stack import cli_at, free_port

# Run alone with: .venv/bin/pytest tests/e2e/test_sleep_story.py -s

SCALE = {
    "cold start (MiniMax-M2.5, ~75 s)": 75 / FAKE_ENGINE["start_s"],
    "level-1 wake (3-5 s)": 4 / FAKE_ENGINE["wake_s"],
}
"""How much faster the stand-in is than the story's box, per step."""
PHASES = ("kimi", "minimax") * 3
"""Kimi serves first (it was added first); MiniMax's first turn is its cold start, and each
later turn wakes one model from level-1 sleep: two wakes each, the second of each predicted
from the first."""
CLIENTS = 2
REQUESTS_PER_CLIENT = 3
PREDICTION_TOLERANCE = 0.2


@dataclass(frozen=True)
class Reply:
    phase: int
    model: str
    status: int
    body: str


@dataclass(frozen=True)
class Story:
    state_dir: Path
    replies: list[Reply]
    fleet: dict[str, Any]
    placements: dict[str, Any]
    gpu_node: str
    operations: list[dict[str, Any]]


def _cli(state_dir: Path, *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    return cli_at(state_dir, *args, timeout_s=timeout_s)


async def _alternate(base_url: str) -> list[Reply]:
    """Each phase: every client sends its requests to the phase's model, one after another;
    the next phase starts when all are answered."""
    replies: list[Reply] = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(120.0)) as http:

        async def client(phase: int, name: str) -> None:
            for _ in range(REQUESTS_PER_CLIENT):
                body = {"model": f"{name}-chat", "prompt": "The cluster", "max_tokens": 4}
                reply = await http.post(f"{base_url}/completions", json=body)
                replies.append(Reply(phase, name, reply.status_code, reply.text[:300]))

        for phase, name in enumerate(PHASES):
            await asyncio.gather(*(client(phase, name) for _ in range(CLIENTS)))
    return replies


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    from cluster.startup.ray_auth import apply_token_auth_default

    apply_token_auth_default()
    import ray
    from ray.cluster_utils import Cluster

    print(f"\nstand-in engine {FAKE_ENGINE}; faster than the story's box by {SCALE}")
    state_dir = tmp_path_factory.mktemp("sleep-story")
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 4, "include_dashboard": False}
    )
    try:
        cluster.add_node(num_cpus=24, num_gpus=8, node_ip_address=GPU_NODE_IP)
        cluster.wait_for_nodes()
        assert cluster.head_node is not None
        inventory = state_dir / "inventory.yaml"
        inventory.write_text(inventory_file(cluster.head_node.node_ip_address))
        fleet = state_dir / "fleet.yaml"
        fleet.write_text(fleet_file(sleep_level=1))
        port = free_port()
        up = _cli(state_dir, *up_args(cluster.address, port, inventory, fleet))
        try:
            assert up.returncode == 0, up.stdout + up.stderr
            replies = asyncio.run(_alternate(f"http://127.0.0.1:{port}/v1"))
            recorded = json.loads((state_dir / "manager" / "fleet.json").read_text())
            apps = [f"model-{n}-g{m['generation']}" for n, m in recorded["models"].items()]
            ray.init(address=cluster.address, namespace="switchyard", log_to_driver=False)
            try:
                placed = placements(apps)
                gpu_node = next(n["NodeID"][:12] for n in ray.nodes() if n["Resources"].get("GPU"))
            finally:
                ray.shutdown()
            yield Story(
                state_dir, replies, recorded, placed, gpu_node, journal_since(state_dir, 0.0)
            )
        finally:
            _cli(state_dir, "down")
    finally:
        cluster.shutdown()
        os.environ.pop("RAY_ADDRESS", None)


def test_every_request_of_the_alternating_load_is_answered(story: Story) -> None:
    assert len(story.replies) == len(PHASES) * CLIENTS * REQUESTS_PER_CLIENT
    failed = [r for r in story.replies if r.status != 200]
    assert not failed, failed


def test_each_turn_wakes_the_model_asked_for_after_putting_the_other_to_sleep(
    story: Story,
) -> None:
    wakes = [o for o in story.operations if o["kind"] == "wake"]
    # Kimi serves from its add; every later phase is one wake of the model it asks for.
    assert [(o["model"], o["outcome"]) for o in wakes] == [(n, "done") for n in PHASES[1:]], wakes
    # Each wake first put the other model, awake on the same GPUs, to sleep.
    assert all("sleeping" in o["phase_seconds"] for o in wakes), wakes
    models = story.fleet["models"]
    # The last turn is MiniMax's: Kimi, the least recently used, sleeps at level 1 beside it.
    assert not models["minimax"]["parked"]
    assert models["kimi"]["parked"] and models["kimi"]["asleep_level"] == 1
    # Only MiniMax's first turn started an engine: every later one woke a sleeping engine.
    assert models["kimi"]["generation"] == 1
    assert [w["path"] for w in models["kimi"]["wakes"]] == ["level_1", "level_1"]
    assert [w["path"] for w in models["minimax"]["wakes"]] == ["level_1", "level_1"]


def test_a_wake_predicted_from_the_models_earlier_wakes_is_within_20_percent(
    story: Story,
) -> None:
    rows = wake_rows(story.fleet)  # each model's wakes in order, as the manager predicted them
    firsts = {name: next(r for r in rows if r["model"] == name) for name in STORY}
    learned = [r for r in rows if r not in firsts.values()]
    assert len(learned) == 2, rows
    for row in learned:
        assert abs(row["measured_s"] / row["predicted_s"] - 1) <= PREDICTION_TOLERANCE, rows


def test_both_models_stay_placed_on_the_gpu_node_at_half_a_gpu_per_rank(story: Story) -> None:
    by_model = {app.split("-")[1]: placed for app, placed in story.placements.items()}
    assert set(by_model) == set(STORY), story.placements
    for name, placed in by_model.items():
        # Both of MiniMax's replicas on the 8 GPUs that Kimi, asleep, still holds.
        assert placed["groups"] == STORY[name]["replicas"], story.placements
        assert placed["nodes"] == [story.gpu_node], story.placements
        assert placed["gpu_per_rank"] == [0.5], story.placements
