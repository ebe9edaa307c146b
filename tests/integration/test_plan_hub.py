"""`switchyard plan ORG/NAME` fetches only config.json and the safetensors index from the Hub.

The Hub is the local stand-in (local_hub.py) on 127.0.0.1; nothing reaches the internet.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

from tests.integration.local_hub import LocalHub

REPO_ROOT = Path(__file__).resolve().parents[2]


def _plan(hub: LocalHub, cache: Path, repo_id: str) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        HF_ENDPOINT=hub.url,
        HF_HUB_CACHE=str(cache),
        HF_HUB_DISABLE_TELEMETRY="1",
        PYTHONPATH=str(REPO_ROOT),
    )
    env.pop("HF_HUB_OFFLINE", None)
    command = [
        sys.executable,
        "-m",
        "switchyard",
        "plan",
        repo_id,
        "--gpu",
        "rtx-pro-6000",
        "--gpus-per-node",
        "8",
        "--json",
    ]
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _config() -> bytes:
    source = resources.files("cluster.miniature_generator").joinpath(
        "reference_configs/MiniMax-M2.5.config.json"
    )
    return source.read_bytes()


def test_plan_reads_the_hub_index_total_and_fetches_nothing_else(tmp_path: Path) -> None:
    total = 230_000_000_000
    index = {"metadata": {"total_size": total}, "weight_map": {"w": "model-00001.safetensors"}}
    with LocalHub() as hub:
        hub.add_repo(
            "MiniMaxAI/MiniMax-M2.5",
            {
                "config.json": _config(),
                "model.safetensors.index.json": json.dumps(index).encode(),
                "model-00001.safetensors": b"\0" * 2048,
            },
        )
        done = _plan(hub, tmp_path / "cache", "MiniMaxAI/MiniMax-M2.5")
        fetched = {r.path.rsplit("/", 1)[-1] for r in hub.downloads("MiniMaxAI/MiniMax-M2.5")}
    assert done.returncode == 0, done.stderr
    assert fetched == {"config.json", "model.safetensors.index.json"}
    data = json.loads(done.stdout)
    tp4 = next(
        c for c in data["candidates"] if (c["tp"], c["pp"], c["dp"], c["ep"]) == (4, 1, 1, False)
    )
    assert tp4["weights_gib_per_gpu"] >= round(total / 4 / 2**30, 2)


def test_plan_without_an_index_estimates_the_weights(tmp_path: Path) -> None:
    with LocalHub() as hub:
        hub.add_repo("org/no-index", {"config.json": _config()})
        done = _plan(hub, tmp_path / "cache", "org/no-index")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["admitted"] is True


def test_an_unknown_hub_repo_exits_2_with_one_line(tmp_path: Path) -> None:
    with LocalHub() as hub:
        done = _plan(hub, tmp_path / "cache", "org/missing")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "cannot fetch config.json" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
