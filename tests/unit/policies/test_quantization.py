"""Quantization configs: formats, ignore lists and bytes per parameter."""

from __future__ import annotations

import pytest

from policies.checkpoint.module_groups import ModuleGroup
from policies.checkpoint.quantization import QuantFormat, module_matches, parse_quantization
from policies.errors import InvalidConfig, UnsupportedModel

NAMES = {
    ModuleGroup.ATTENTION: "model.layers.1.self_attn.q_proj",
    ModuleGroup.DENSE_MLP: "model.layers.0.mlp.gate_proj",
    ModuleGroup.ROUTED_EXPERTS: "model.layers.1.mlp.experts.0.gate_proj",
}


def test_plain_names_match_whole_components_so_a_router_gate_is_not_gate_proj() -> None:
    assert module_matches("model.layers.1.block_sparse_moe.gate", "gate")
    assert not module_matches("model.layers.1.mlp.gate_proj", "gate")
    assert module_matches("lm_head", "lm_head")


def test_regex_entries_match_from_the_start_like_compressed_tensors() -> None:
    assert module_matches("model.layers.3.self_attn.q_a_proj", "re:.*self_attn.*")
    assert module_matches(
        "model.layers.0.mlp.gate_proj", r"re:.*mlp\.(gate|up|gate_up|down)_proj.*"
    )
    assert not module_matches(
        "model.layers.1.mlp.experts.0.gate_proj", r"re:.*mlp\.(gate|up|gate_up|down)_proj.*"
    )


def test_globs_match_module_prefixes() -> None:
    assert module_matches("model.layers.1.self_attn.q_proj", "model.layers.*.self_attn")


def test_no_quantization_config_means_unquantized() -> None:
    spec = parse_quantization(None, NAMES, 16)
    assert spec.format is QuantFormat.NONE
    assert spec.bytes_per_param(2) == 2


def test_hf_fp8_with_blocks_is_block_fp8_and_costs_about_one_byte() -> None:
    raw = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    spec = parse_quantization(raw, NAMES, 16)
    assert spec.is_block_fp8
    assert spec.block_size == (128, 128)
    assert spec.quantized_groups == frozenset(NAMES)
    assert spec.bytes_per_param(2) == pytest.approx(1.0, abs=0.001)


def test_fp8_without_blocks_has_no_alignment_rule() -> None:
    spec = parse_quantization({"quant_method": "fp8"}, NAMES, 16)
    assert spec.format is QuantFormat.FP8
    assert not spec.is_block_fp8


def test_compressed_tensors_int4_group_32_costs_half_a_byte_plus_scales() -> None:
    raw = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "g": {"weights": {"type": "int", "num_bits": 4, "strategy": "group", "group_size": 32}}
        },
        "ignore": ["lm_head", "re:.*self_attn.*", r"re:.*mlp\.(gate|up|gate_up|down)_proj.*"],
    }
    spec = parse_quantization(raw, NAMES, 16)
    assert spec.format is QuantFormat.INT4
    assert spec.quantized_groups == frozenset({ModuleGroup.ROUTED_EXPERTS})
    assert spec.bytes_per_param(2) == pytest.approx(0.5 + 2 / 32)


def test_compressed_tensors_fp8_block_reads_the_block_structure() -> None:
    raw = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "g": {
                "weights": {
                    "type": "float",
                    "num_bits": 8,
                    "strategy": "block",
                    "block_structure": [128, 128],
                }
            }
        },
    }
    spec = parse_quantization(raw, NAMES, 16)
    assert spec.format is QuantFormat.FP8_BLOCK
    assert spec.block_size == (128, 128)


def test_mxfp4_and_nvfp4_cost_about_half_a_byte() -> None:
    mx = parse_quantization({"quant_method": "mxfp4"}, NAMES, 16)
    nv = parse_quantization({"quant_method": "modelopt", "quant_algo": "NVFP4"}, NAMES, 16)
    assert mx.format is QuantFormat.MXFP4
    assert nv.format is QuantFormat.NVFP4
    assert mx.bytes_per_param(2) == pytest.approx(0.53, abs=0.01)
    assert nv.bytes_per_param(2) == pytest.approx(0.5625)


def test_mixed_compressed_tensors_schemes_are_refused_not_guessed() -> None:
    raw = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "a": {"weights": {"type": "int", "num_bits": 4, "group_size": 32}},
            "b": {"weights": {"type": "int", "num_bits": 8}},
        },
    }
    with pytest.raises(UnsupportedModel, match="several weight schemes"):
        parse_quantization(raw, NAMES, 16)


def test_malformed_block_size_names_the_field() -> None:
    with pytest.raises(InvalidConfig, match="weight_block_size"):
        parse_quantization({"quant_method": "fp8", "weight_block_size": [128]}, NAMES, 16)
