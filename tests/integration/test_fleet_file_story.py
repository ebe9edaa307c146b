"""The story's fleet file (examples/story/fleet.yaml) and its first revision, compared with
`diff --from` on the described 8x RTX PRO 6000 box with no cluster running: the hub ids'
configs come from a local Hub stand-in (tests/integration/local_hub.py), as `diff` reads
them from the Hub. docs/fleet-file.md shows the same comparison."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.integration.local_hub import LocalHub
from tests.support.running_stack import SWITCHYARD

REPO = Path(__file__).resolve().parents[2]
STORY = REPO / "examples" / "story"
CONFIGS = REPO / "cluster" / "miniature_generator" / "reference_configs"
REVISION_1 = (STORY / "fleet.revision-1.yaml").read_text()
"""The story's revision 1: Kimi-K2.5 at TP8 with DCP8 (examples/story/fleet.revision-1.yaml)."""


def story_diff(
    tmp_path: Path, *extra: str, new: Path = STORY / "fleet.yaml"
) -> subprocess.CompletedProcess[str]:
    """`diff --from REVISION_1 -f fleet.yaml --inventory inventory.yaml` against a local
    Hub holding the two models' real config.json."""
    old = tmp_path / "fleet.revision-1.yaml"
    old.write_text(REVISION_1)
    with LocalHub() as hub:
        hub.add_repo(
            "moonshotai/Kimi-K2.5",
            {"config.json": (CONFIGS / "Kimi-K2.5.config.json").read_bytes()},
        )
        hub.add_repo(
            "MiniMaxAI/MiniMax-M2.5",
            {"config.json": (CONFIGS / "MiniMax-M2.5.config.json").read_bytes()},
        )
        env = {
            **os.environ,
            "HF_ENDPOINT": hub.url,
            "HF_HOME": str(tmp_path / "hf"),
            "SWITCHYARD_HOME": str(tmp_path / "home"),
        }
        return subprocess.run(
            [
                SWITCHYARD,
                "diff",
                "--from",
                str(old),
                "-f",
                str(new),
                "--inventory",
                str(STORY / "inventory.yaml"),
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=False,
        )


def test_the_story_revisions_are_one_break_before_make_swap(tmp_path: Path) -> None:
    result = story_diff(tmp_path, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    plan = json.loads(result.stdout)
    (swap,) = plan["changes"]
    assert (swap["action"], swap["replaces"], swap["model"]) == (
        "swap",
        "kimi-k2.5",
        "minimax-m2.5",
    )
    # Kimi holds all eight GPUs, so MiniMax can only start on what it frees.
    assert swap["strategy"] == "break-before-make" and swap["admitted"]
    assert swap["layout"] == "TP4xPP1xDP1+EP" and swap["accelerators"] == 4
    assert swap["engine"]["tool_call_parser"] == "minimax_m2"
    assert set(swap["aliases"]) == {"default", "coder"}


def test_a_layout_vllm_refuses_is_refused_by_the_offline_diff(tmp_path: Path) -> None:
    tp8 = tmp_path / "tp8.yaml"
    tp8.write_text((STORY / "fleet.yaml").read_text().replace("{tp: 4, ep: true}", "{tp: 8}"))
    result = story_diff(tmp_path, "--json", new=tp8)
    assert result.returncode == 1, result.stdout + result.stderr
    (swap,) = json.loads(result.stdout)["changes"]
    assert any(r.startswith("fp8_block_misaligned") for r in swap["reasons"]), swap
