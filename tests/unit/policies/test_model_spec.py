"""Parsing config.json into a ModelSpec: every supported family, and clear refusals."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from policies.checkpoint.hf_config import SUPPORTED_ARCHITECTURES, load_model_spec, parse_hf_config
from policies.checkpoint.model_spec import AttentionKind, ModelFamily, ModelSpec
from policies.checkpoint.module_groups import ModuleGroup
from policies.checkpoint.parameters import parameter_counts
from policies.checkpoint.quantization import QuantFormat
from policies.errors import InvalidConfig, UnsupportedModel
from tests.unit.policies.conftest import FIXTURES, fixture_config, reference_config

SpecOf = Callable[[str], ModelSpec]


def test_kimi_k25_is_read_through_its_multimodal_wrapper(kimi: ModelSpec) -> None:
    assert kimi.wrapper_architecture == "KimiK25ForConditionalGeneration"
    assert kimi.architecture == "DeepseekV3ForCausalLM"
    assert kimi.family is ModelFamily.MOE
    assert kimi.attention.kind is AttentionKind.MLA
    assert kimi.attention.mla is not None
    assert kimi.attention.mla.latent_dim == 512 + 64
    assert kimi.num_layers == 61
    assert kimi.num_dense_layers == 1
    assert kimi.moe is not None
    assert (kimi.moe.num_experts, kimi.moe.experts_per_token) == (384, 8)
    assert kimi.moe.expert_intermediate_size == 2048
    assert kimi.moe.shared_intermediate_size == 2048
    assert kimi.max_context == 262_144
    assert kimi.mtp_layers == 0
    assert kimi.extra_params > 0, "the vision tower counts toward the weights"


def test_kimi_k25_quantizes_only_routed_experts_to_int4_group_32(kimi: ModelSpec) -> None:
    quant = kimi.quantization
    assert quant.format is QuantFormat.INT4
    assert quant.group_size == 32
    assert quant.quantized_groups == frozenset({ModuleGroup.ROUTED_EXPERTS})


def test_minimax_m25_is_gqa_moe_with_fp8_128_blocks(minimax: ModelSpec) -> None:
    assert minimax.architecture == "MiniMaxM2ForCausalLM"
    att = minimax.attention
    assert (att.kind, att.num_heads, att.num_kv_heads, att.head_dim) == (
        AttentionKind.GQA,
        48,
        8,
        128,
    )
    assert minimax.moe is not None
    assert minimax.moe.num_experts == 256
    assert minimax.moe.expert_intermediate_size == 1536
    assert minimax.moe.shared_intermediate_size == 0
    assert minimax.num_dense_layers == 0
    assert minimax.quantization.format is QuantFormat.FP8_BLOCK
    assert minimax.quantization.block_size == (128, 128)
    assert ModuleGroup.ATTENTION in minimax.quantization.quantized_groups
    assert minimax.mtp_layers == 3, "declared, though the checkpoint ships no MTP weights"


def test_minimax_m25_parameter_count_matches_the_model_card(minimax: ModelSpec) -> None:
    counted = parameter_counts(minimax).total
    assert counted == pytest.approx(228_703_644_928, rel=1e-3)
    assert parameter_counts(minimax).active_per_token == pytest.approx(10e9, rel=0.1)


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [
        ("Qwen3-235B-A22B", 235, 22),
        ("gpt-oss-120b", 116.8, 5.1),
        ("GLM-4.5", 355, 32),
        ("GLM-5", 744, 40),
        ("Llama-3-70B", 70.6, 70),
        ("Qwen2.5-72B", 72.7, 72),
        ("Qwen3-32B", 32.8, 32.8),
        ("DeepSeek-V3", 671, 37),
    ],
)
def test_parameter_counts_match_published_figures(
    fixture_spec: SpecOf, name: str, total_b: float, active_b: float
) -> None:
    counts = parameter_counts(fixture_spec(name))
    assert counts.total / 1e9 == pytest.approx(total_b, rel=0.02)
    assert counts.active_per_token / 1e9 == pytest.approx(active_b, rel=0.08)


def test_gpt_oss_mixes_sliding_and_full_layers_and_keeps_attention_unquantized(
    fixture_spec: SpecOf,
) -> None:
    spec = fixture_spec("gpt-oss-120b")
    assert spec.attention.sliding_window == 128
    assert spec.attention.num_sliding_layers == 18
    assert spec.attention.has_sliding_full_mix
    assert spec.quantization.format is QuantFormat.MXFP4
    assert spec.quantization.quantized_groups == frozenset({ModuleGroup.ROUTED_EXPERTS})


def test_glm5_is_mla_with_a_sparse_attention_indexer(fixture_spec: SpecOf) -> None:
    spec = fixture_spec("GLM-5")
    assert spec.architecture == "GlmMoeDsaForCausalLM"
    assert spec.attention.kind is AttentionKind.MLA
    assert spec.attention.indexer is not None
    assert spec.attention.indexer.head_dim == 128
    assert spec.num_dense_layers == 3


def test_glm45_counts_shared_experts_and_first_dense_layers(fixture_spec: SpecOf) -> None:
    spec = fixture_spec("GLM-4.5")
    assert spec.attention.kind is AttentionKind.GQA
    assert spec.moe is not None
    assert spec.moe.shared_intermediate_size == 1536
    assert spec.num_dense_layers == 3
    assert spec.moe.num_moe_layers == 89


def test_qwen3_moe_honours_mlp_only_layers() -> None:
    cfg = fixture_config("Qwen3-235B-A22B")
    cfg["mlp_only_layers"] = [0, 1]
    spec = parse_hf_config(cfg)
    assert spec.moe is not None
    assert spec.moe.num_moe_layers == 92
    assert spec.num_dense_layers == 2


def test_qwen2_sliding_window_applies_from_max_window_layers() -> None:
    cfg = fixture_config("Qwen2.5-72B")
    cfg.update(use_sliding_window=True, sliding_window=4096, max_window_layers=70)
    spec = parse_hf_config(cfg)
    assert spec.attention.sliding_window == 4096
    assert spec.attention.sliding_layers == tuple(range(70, 80))


def test_dense_models_are_dense_gqa(fixture_spec: SpecOf) -> None:
    for name in ("Llama-3-70B", "Qwen2.5-72B", "Qwen3-32B"):
        spec = fixture_spec(name)
        assert spec.family is ModelFamily.DENSE
        assert spec.moe is None
        assert spec.attention.kind is AttentionKind.GQA
        assert spec.quantization.format is QuantFormat.NONE


def test_mha_is_told_apart_from_gqa() -> None:
    cfg = fixture_config("Llama-3-70B")
    cfg["num_key_value_heads"] = 64
    assert parse_hf_config(cfg).attention.kind is AttentionKind.MHA


def test_unknown_architecture_is_refused_with_the_supported_list() -> None:
    with pytest.raises(UnsupportedModel, match=r"'MambaForCausalLM' is not supported.*Llama"):
        parse_hf_config({"architectures": ["MambaForCausalLM"], "hidden_size": 1})


def test_unknown_wrapper_says_it_wraps_a_text_config() -> None:
    cfg = {"architectures": ["FooForConditionalGeneration"], "text_config": {}}
    with pytest.raises(UnsupportedModel, match="wraps a text_config"):
        parse_hf_config(cfg)


def test_minimax_with_linear_attention_layers_is_refused() -> None:
    cfg = reference_config("MiniMax-M2.5")
    cfg["attn_type_list"] = [0, *cfg["attn_type_list"][1:]]
    with pytest.raises(UnsupportedModel, match="linear-attention"):
        parse_hf_config(cfg)


def test_unknown_quantization_method_is_refused() -> None:
    cfg = fixture_config("Llama-3-70B")
    cfg["quantization_config"] = {"quant_method": "bitsandbytes"}
    with pytest.raises(UnsupportedModel, match="bitsandbytes"):
        parse_hf_config(cfg)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("num_attention_heads", None, "num_attention_heads is missing"),
        ("hidden_size", "big", "hidden_size must be a positive integer"),
        ("num_key_value_heads", 128, "exceeds num_attention_heads"),
        ("torch_dtype", "int3", "torch_dtype"),
        ("architectures", [], "architectures must be a non-empty list"),
    ],
)
def test_malformed_fields_are_named_in_the_error(field: str, value: object, message: str) -> None:
    cfg = fixture_config("Llama-3-70B")
    if value is None:
        del cfg[field]
    else:
        cfg[field] = value
    with pytest.raises(InvalidConfig, match=message):
        parse_hf_config(cfg)


def test_load_model_spec_reads_a_file_or_a_model_directory(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(reference_config("MiniMax-M2.5")))
    from_dir = load_model_spec(tmp_path)
    from_file = load_model_spec(tmp_path / "config.json")
    assert from_dir == from_file


def test_load_model_spec_reports_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfig, match="cannot read"):
        load_model_spec(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InvalidConfig, match="not valid JSON"):
        load_model_spec(bad)


def test_every_fixture_parses_and_every_family_is_covered() -> None:
    architectures = {load_model_spec(p).architecture for p in FIXTURES.glob("*.config.json")}
    architectures |= {"MiniMaxM2ForCausalLM", "DeepseekV3ForCausalLM"}
    required = {
        "DeepseekV3ForCausalLM",
        "MiniMaxM2ForCausalLM",
        "Qwen2ForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM",
        "LlamaForCausalLM",
        "Glm4MoeForCausalLM",
        "GlmMoeDsaForCausalLM",
        "GptOssForCausalLM",
    }
    assert required <= architectures
    assert "KimiK25ForConditionalGeneration" in SUPPORTED_ARCHITECTURES
