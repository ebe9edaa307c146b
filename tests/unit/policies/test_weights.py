"""Weight sizes: measured from safetensors, read from the index, estimated, or overridden."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from policies.checkpoint.model_spec import ModelSpec
from policies.checkpoint.weights import (
    WeightSize,
    WeightSource,
    estimate_weights,
    is_expert_tensor,
    override_weights,
    read_safetensors_header,
    weights_from_index,
    weights_from_model_dir,
)
from policies.errors import InvalidConfig
from policies.units import GIB
from tests.unit.policies.safetensors_files import write_safetensors

SpecOf = Callable[[str], ModelSpec]


@pytest.mark.parametrize(
    ("name", "expert"),
    [
        ("model.layers.3.mlp.experts.17.gate_proj.weight", True),
        ("model.layers.3.block_sparse_moe.experts.0.w1.weight_scale_inv", True),
        ("model.layers.3.mlp.experts.gate_up_proj_blocks", True),
        ("language_model.model.layers.3.mlp.experts.5.down_proj.weight_packed", True),
        ("model.layers.3.mlp.shared_experts.gate_proj.weight", False),
        ("model.layers.3.mlp.shared_expert.gate_proj.weight", False),
        ("model.layers.3.mlp.gate.weight", False),
        ("model.layers.3.self_attn.q_proj.weight", False),
    ],
)
def test_routed_expert_tensors_are_told_from_the_rest(name: str, expert: bool) -> None:
    assert is_expert_tensor(name) is expert


def test_estimates_match_the_published_checkpoint_sizes(
    kimi: ModelSpec, minimax: ModelSpec
) -> None:
    assert estimate_weights(kimi).total_bytes / GIB == pytest.approx(554.3, rel=0.01)
    assert estimate_weights(minimax).total_bytes / GIB == pytest.approx(214.3, rel=0.01)
    assert estimate_weights(minimax).source is WeightSource.ESTIMATE


def test_gpt_oss_mxfp4_estimate_is_about_61_gib(fixture_spec: SpecOf) -> None:
    assert estimate_weights(fixture_spec("gpt-oss-120b")).total_bytes / GIB == pytest.approx(
        60.8, rel=0.03
    )


def test_override_keeps_the_estimated_expert_share(minimax: ModelSpec) -> None:
    weights = override_weights(minimax, 200 * GIB)
    assert weights.total_bytes == 200 * GIB
    assert weights.source is WeightSource.OVERRIDE
    estimate = estimate_weights(minimax)
    assert weights.expert_bytes / weights.total_bytes == pytest.approx(
        estimate.expert_bytes / estimate.total_bytes
    )


def test_safetensors_headers_give_exact_expert_and_other_bytes(
    tmp_path: Path, minimax: ModelSpec
) -> None:
    a = write_safetensors(
        tmp_path / "model-00001-of-00002.safetensors",
        {
            "model.embed_tokens.weight": ("BF16", [64, 32]),
            "model.layers.0.self_attn.q_proj.weight": ("F8_E4M3", [32, 32]),
        },
    )
    b = write_safetensors(
        tmp_path / "model-00002-of-00002.safetensors",
        {
            "model.layers.0.block_sparse_moe.experts.0.w1.weight": ("F8_E4M3", [16, 32]),
            "model.layers.0.block_sparse_moe.experts.1.w1.weight": ("F8_E4M3", [16, 32]),
        },
    )
    expert = "model.layers.0.block_sparse_moe.experts.0.w1.weight"
    index = {
        "metadata": {"total_size": a + b},
        "weight_map": {
            "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
            expert: "model-00002-of-00002.safetensors",
        },
    }
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    weights = weights_from_model_dir(tmp_path, minimax)
    assert weights == WeightSize(
        total_bytes=a + b, expert_bytes=2 * 16 * 32, source=WeightSource.SAFETENSORS_HEADERS
    )


def test_index_without_local_shards_uses_its_total_size(tmp_path: Path, minimax: ModelSpec) -> None:
    index = {"metadata": {"total_size": 230_000_000_000}, "weight_map": {"x": "absent.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    weights = weights_from_model_dir(tmp_path, minimax)
    assert weights is not None
    assert weights.total_bytes == 230_000_000_000
    assert weights.source is WeightSource.SAFETENSORS_INDEX
    assert 0 < weights.expert_bytes < weights.total_bytes


def test_single_file_checkpoints_are_measured(tmp_path: Path, minimax: ModelSpec) -> None:
    size = write_safetensors(tmp_path / "model.safetensors", {"w": ("BF16", [8, 8])})
    weights = weights_from_model_dir(tmp_path, minimax)
    assert weights is not None
    assert weights.total_bytes == size


def test_a_directory_without_safetensors_has_nothing_to_measure(
    tmp_path: Path, minimax: ModelSpec
) -> None:
    assert weights_from_model_dir(tmp_path, minimax) is None


def test_the_real_safetensors_library_agrees_with_the_header_reader(tmp_path: Path) -> None:
    numpy = pytest.importorskip("numpy")
    st = pytest.importorskip("safetensors.numpy")
    path = tmp_path / "model.safetensors"
    st.save_file({"a": numpy.zeros((3, 5), dtype=numpy.float32)}, str(path))
    assert read_safetensors_header(path) == {"a": 60}


def test_broken_inputs_raise_invalid_config(tmp_path: Path, minimax: ModelSpec) -> None:
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(b"\x01")
    with pytest.raises(InvalidConfig, match="too short"):
        read_safetensors_header(bad)
    with pytest.raises(InvalidConfig, match="total_size"):
        weights_from_index({"metadata": {}}, minimax)
    with pytest.raises(InvalidConfig, match="must be within"):
        WeightSize(total_bytes=10, expert_bytes=11, source=WeightSource.OVERRIDE)
