"""`switchyard miniature`: the command line around write_miniature."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster.miniature_generator import MINIATURES
from domain.exit_codes import ExitCode
from switchyard.cli import main
from switchyard.commands.miniature import MINIATURE_NAMES


def test_the_command_offers_exactly_the_catalog_names() -> None:
    assert tuple(MINIATURES) == MINIATURE_NAMES


def test_the_command_writes_the_model_and_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "mini"
    assert main(["miniature", "minimax-m2.5", str(out_dir), "--seed", "3"]) == ExitCode.OK
    config = json.loads((out_dir / "config.json").read_text())
    assert config["architectures"] == ["MiniMaxM2ForCausalLM"]
    assert config["switchyard_miniature"]["seed"] == 3
    printed = capsys.readouterr().out
    assert str(out_dir) in printed
    assert "MiniMaxAI/MiniMax-M2.5" in printed


def test_a_non_empty_out_dir_exits_2_with_one_line_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "keep.txt").write_text("x")
    assert main(["miniature", "llama", str(tmp_path)]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "OUT_DIR" in err and "not empty" in err
    assert err.count("\n") == 1
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_a_negative_seed_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["miniature", "llama", str(tmp_path / "m"), "--seed", "-1"]) == ExitCode.BAD_INPUT
    assert "seed -1" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_an_unknown_name_exits_2(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["miniature", "gpt-5", str(tmp_path / "m")])
    assert exited.value.code == ExitCode.BAD_INPUT


def test_corrupt_writes_a_model_whose_weights_do_not_load(tmp_path: Path) -> None:
    from safetensors import SafetensorError, safe_open

    out_dir = tmp_path / "bad"
    assert main(["miniature", "llama", str(out_dir), "--corrupt"]) == ExitCode.OK
    with pytest.raises(SafetensorError), safe_open(str(out_dir / "model.safetensors"), "pt"):
        pass
