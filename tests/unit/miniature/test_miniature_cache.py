"""ensure_miniature: generate on first use, reuse afterwards, safe under concurrent callers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cluster.miniature_generator import FORMAT_VERSION, ensure_miniature
from domain.exit_codes import UserInputError


def test_the_first_call_writes_the_model_and_later_calls_reuse_it(tmp_path: Path) -> None:
    first = ensure_miniature("llama", tmp_path)
    assert first == tmp_path / f"llama-seed0-v{FORMAT_VERSION}"
    written_ns = (first / "model.safetensors").stat().st_mtime_ns
    assert ensure_miniature("llama", tmp_path) == first
    assert (first / "model.safetensors").stat().st_mtime_ns == written_ns


def test_each_seed_has_its_own_cached_directory(tmp_path: Path) -> None:
    assert ensure_miniature("llama", tmp_path, seed=1) != ensure_miniature("llama", tmp_path)


def test_two_processes_at_once_get_one_complete_model(tmp_path: Path) -> None:
    script = (
        "import sys; from pathlib import Path;"
        "from cluster.miniature_generator import ensure_miniature;"
        "print(ensure_miniature('llama', Path(sys.argv[1])))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=300)[0].strip() for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0]
    assert outputs[0] == outputs[1]
    model_dir = Path(outputs[0])
    assert (model_dir / "config.json").is_file()
    visible = [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")]
    assert visible == [model_dir.name]


def test_leftovers_of_a_crashed_writer_are_cleared_before_writing(tmp_path: Path) -> None:
    target_name = f"llama-seed0-v{FORMAT_VERSION}"
    leftover = tmp_path / f".{target_name}.partial-crashed"
    leftover.mkdir()
    (leftover / "model.safetensors").write_bytes(b"half")
    (tmp_path / target_name).mkdir()  # an empty target, as a crash between steps could leave
    model_dir = ensure_miniature("llama", tmp_path)
    assert (model_dir / "config.json").is_file()
    assert not leftover.exists()


def test_bad_input_is_refused_before_the_cache_is_touched(tmp_path: Path) -> None:
    with pytest.raises(UserInputError):
        ensure_miniature("nope", tmp_path / "cache")
    with pytest.raises(UserInputError):
        ensure_miniature("llama", tmp_path / "cache", seed=-3)
    assert not (tmp_path / "cache").exists()
