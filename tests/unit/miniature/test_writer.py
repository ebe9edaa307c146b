"""write_miniature: a complete, deterministic Hugging Face directory, written atomically."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

from cluster.miniature_generator import MINIATURE_RECORD_KEY, MINIATURES, write_miniature
from cluster.miniature_generator import writer as writer_module
from cluster.miniature_generator.recipe import TensorDtype, TensorInit
from domain.exit_codes import UserInputError

EXPECTED_FILES = {
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
}


def _hashes(model_dir: Path) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(model_dir.iterdir())
    }


def test_a_miniature_directory_holds_every_file_vllm_and_transformers_read(
    written_miniatures: dict[str, Path],
) -> None:
    for model_dir in written_miniatures.values():
        assert {path.name for path in model_dir.iterdir()} == EXPECTED_FILES


def test_the_written_config_is_the_recipe_config_for_the_seed(
    written_miniatures: dict[str, Path],
) -> None:
    for name, model_dir in written_miniatures.items():
        written = json.loads((model_dir / "config.json").read_text())
        assert written == MINIATURES[name].config(seed=0)
        assert written[MINIATURE_RECORD_KEY]["seed"] == 0


def test_the_same_seed_writes_the_same_bytes(
    tmp_path: Path, written_miniatures: dict[str, Path]
) -> None:
    again = write_miniature("kimi-k2.5", tmp_path / "again", seed=0)
    assert _hashes(again) == _hashes(written_miniatures["kimi-k2.5"])


def test_another_seed_changes_the_weights_but_not_the_tokenizer(
    tmp_path: Path, written_miniatures: dict[str, Path]
) -> None:
    other = _hashes(write_miniature("llama", tmp_path / "seed1", seed=1))
    first = _hashes(written_miniatures["llama"])
    assert other["model.safetensors"] != first["model.safetensors"]
    assert other["config.json"] != first["config.json"]  # the record names the seed
    assert other["tokenizer.json"] == first["tokenizer.json"]


def test_the_weights_are_exactly_the_recipe_tensors_with_small_finite_values(
    written_miniatures: dict[str, Path],
) -> None:
    import torch
    from safetensors import safe_open

    for name, model_dir in written_miniatures.items():
        recipe = MINIATURES[name]
        with safe_open(str(model_dir / "model.safetensors"), framework="pt") as handle:
            assert set(handle.keys()) == {spec.name for spec in recipe.tensors}
            for spec in recipe.tensors:
                tensor = handle.get_tensor(spec.name)
                assert tuple(tensor.shape) == spec.shape, spec.name
                expected_dtype = (
                    torch.bfloat16 if spec.dtype is TensorDtype.BFLOAT16 else torch.float32
                )
                assert tensor.dtype == expected_dtype, spec.name
                values = tensor.float()
                assert bool(torch.isfinite(values).all()), spec.name
                if spec.init is TensorInit.NORMAL and spec.numel > 10_000:
                    assert math.isclose(float(values.std()), recipe.weight_std, rel_tol=0.05)
                if spec.init is TensorInit.ONES:
                    assert bool((values == 1).all()), spec.name


def test_an_existing_empty_directory_is_filled(tmp_path: Path) -> None:
    out_dir = tmp_path / "empty"
    out_dir.mkdir()
    assert write_miniature("llama", out_dir) == out_dir
    assert (out_dir / "config.json").is_file()


def test_a_non_empty_directory_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    out_dir = tmp_path / "busy"
    out_dir.mkdir()
    (out_dir / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty"):
        write_miniature("llama", out_dir)
    assert [path.name for path in out_dir.iterdir()] == ["notes.txt"]
    assert [path.name for path in tmp_path.iterdir()] == ["busy"]


def test_a_failed_write_leaves_no_model_and_no_staging_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(writer_module, "write_tokenizer", crash)
    with pytest.raises(RuntimeError, match="disk full"):
        write_miniature("llama", tmp_path / "model")
    assert list(tmp_path.iterdir()) == []


def test_a_successful_write_leaves_no_staging_folder(tmp_path: Path) -> None:
    write_miniature("llama", tmp_path / "model")
    assert [path.name for path in tmp_path.iterdir()] == ["model"]


def test_bad_name_or_seed_is_an_input_error_that_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="unknown"):
        write_miniature("mixtral", tmp_path / "a" / "model")
    with pytest.raises(UserInputError, match=r"seed -1 .* 0 or greater"):
        write_miniature("llama", tmp_path / "a" / "model", seed=-1)
    assert list(tmp_path.iterdir()) == []


def test_the_model_directory_is_readable_by_other_users(
    written_miniatures: dict[str, Path],
) -> None:
    model_dir = written_miniatures["llama"]
    assert model_dir.stat().st_mode & 0o755 == 0o755
    for path in model_dir.iterdir():
        assert path.stat().st_mode & 0o444 == 0o444, path.name
