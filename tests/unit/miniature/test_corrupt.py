"""corrupt_weights: a model directory whose weights safetensors (and so vLLM) refuses."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cluster.miniature_generator import corrupt_weights, write_miniature


def test_corrupted_weights_fail_to_open_with_the_error_vllm_reports(tmp_path: Path) -> None:
    from safetensors import SafetensorError, safe_open

    model_dir = write_miniature("llama", tmp_path / "bad")
    corrupt_weights(model_dir)
    # vLLM's engine start fails with this same message from its weight loader.
    with (
        pytest.raises(SafetensorError, match="incomplete metadata, file not fully covered"),
        safe_open(str(model_dir / "model.safetensors"), framework="pt"),
    ):
        pass


def test_corruption_leaves_config_and_tokenizer_intact(tmp_path: Path) -> None:
    model_dir = write_miniature("llama", tmp_path / "bad")
    before = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in model_dir.iterdir()
        if p.suffix != ".safetensors"
    }
    corrupt_weights(model_dir)
    after = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in model_dir.iterdir()
        if p.suffix != ".safetensors"
    }
    assert after == before


def test_a_directory_without_weights_cannot_be_corrupted(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="safetensors"):
        corrupt_weights(tmp_path)
