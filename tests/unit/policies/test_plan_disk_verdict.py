"""`switchyard plan` reports the real size of the weights and each node's disk verdict
(need vs free minus reserve), adding keys to the JSON contract without changing the others."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from switchyard.cli import main
from tests.unit.policies.conftest import reference_config
from tests.unit.policies.safetensors_files import write_safetensors
from tests.unit.policies.test_plan_command import reference_path

GIB = 2**30


def plan_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["plan", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_local_weights_are_sized_from_their_safetensors_headers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(reference_config("MiniMax-M2.5")))
    written = write_safetensors(tmp_path / "model.safetensors", {"w": ("BF16", [1024, 1024])})
    code, data = plan_json(
        capsys, str(tmp_path), "--gpu", "h100", "--gpus-per-node", "1", "--nodes", "2",
        "--disk-free-gib", "10", "--disk-reserve-gib", "2",
    )  # fmt: skip
    assert code == 0
    assert data["weights"] == {
        "total_bytes": written,
        "expert_bytes": 0,
        "source": "safetensors_headers",
    }
    assert data["disk"] == [
        {
            "node": f"node-{i}",
            "cache_dir": "the cache volume",
            "need_bytes": written,
            "free_bytes": 10 * GIB,
            "reserve_bytes": 2 * GIB,
            "reserved_by_others_bytes": 0,
            "usable_bytes": 8 * GIB,
            "fits": True,
        }
        for i in range(2)
    ]


def test_the_reserve_can_turn_a_fit_into_a_rejection(capsys: pytest.CaptureFixture[str]) -> None:
    """MiniMax-M2.5 is ~214 GiB: 220 GiB free fits, unless 20 GiB must stay free."""
    args = [reference_path("MiniMax-M2.5"), "--gpu", "rtx-pro-6000", "--gpus-per-node", "8"]
    code, data = plan_json(capsys, *args, "--disk-free-gib", "220")
    assert code == 0
    assert data["disk"][0]["fits"] is True
    code, data = plan_json(capsys, *args, "--disk-free-gib", "220", "--disk-reserve-gib", "20")
    assert code == 1
    verdict = data["disk"][0]
    assert verdict["fits"] is False
    assert verdict["usable_bytes"] == 200 * GIB
    assert verdict["need_bytes"] == data["weights"]["total_bytes"]
    assert any(r.startswith("disk_insufficient: ") for r in data["reasons"])


def test_without_free_disk_there_is_no_verdict_and_the_old_keys_stay(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, data = plan_json(
        capsys, reference_path("MiniMax-M2.5"), "--gpu", "h200", "--gpus-per-node", "8"
    )
    assert code == 0
    assert data["disk"] == []
    assert data["weights"]["source"] == "estimate"
    assert {"admitted", "reasons", "recommended", "candidates"} <= set(data)


def test_the_table_prints_each_nodes_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["plan", reference_path("MiniMax-M2.5"), "--gpu", "rtx-pro-6000", "--gpus-per-node", "8",
         "--disk-free-gib", "1200", "--disk-reserve-gib", "20"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "disk: node node-0:" in out
    assert "fits (1.2 TiB usable = 1.2 TiB free - 20.0 GiB reserve" in out


def test_a_negative_reserve_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["plan", reference_path("MiniMax-M2.5"), "--gpu", "h200", "--gpus-per-node", "8",
         "--disk-reserve-gib", "-1"]
    )  # fmt: skip
    assert code == 2
    assert "--disk-reserve-gib must be >= 0, got -1" in capsys.readouterr().err
