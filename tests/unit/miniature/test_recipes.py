"""What each miniature keeps from its real model, and that every change is on the record."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.miniature_generator import MINIATURE_RECORD_KEY, MINIATURES, recipe_for
from cluster.miniature_generator.recipe import MiniatureRecipe, TensorDtype
from cluster.miniature_generator.reference import (
    KIMI_K25_CONFIG,
    MINIMAX_M25_CONFIG,
    load_reference_config,
)
from domain.exit_codes import UserInputError

NAMES = ("kimi-k2.5", "minimax-m2.5", "llama")


def _config(name: str) -> dict[str, Any]:
    return MINIATURES[name].config(seed=0)


def test_the_catalog_offers_exactly_the_three_miniatures() -> None:
    assert tuple(MINIATURES) == NAMES


def test_the_catalog_cannot_be_changed_at_runtime() -> None:
    with pytest.raises(TypeError):
        MINIATURES["other"] = MINIATURES["llama"]  # type: ignore[index]


def test_an_unknown_name_is_an_input_error_that_lists_the_allowed_names() -> None:
    with pytest.raises(UserInputError, match=r"'gpt-5'.*kimi-k2\.5, minimax-m2\.5, llama"):
        recipe_for("gpt-5")


@pytest.mark.parametrize("name", NAMES)
def test_every_field_that_differs_from_the_real_config_is_recorded(name: str) -> None:
    recipe = MINIATURES[name]
    miniature = recipe.config_without_record()
    real = dict(recipe.real_config)
    differing = {
        key for key in real.keys() | miniature.keys() if real.get(key) != miniature.get(key)
    }
    assert differing <= set(recipe.deviations())


@pytest.mark.parametrize("name", NAMES)
def test_every_recorded_change_really_differs_and_says_why(name: str) -> None:
    recipe = MINIATURES[name]
    for field, record in recipe.deviations().items():
        assert record["real"] != record["miniature"], field
        assert len(record["why"]) > 20, field


@pytest.mark.parametrize("name", NAMES)
def test_the_record_names_the_real_model_and_the_seed(name: str) -> None:
    record = MINIATURES[name].config(seed=7)[MINIATURE_RECORD_KEY]
    assert record["stands_for"] == MINIATURES[name].stands_for
    assert record["real_architecture"] == MINIATURES[name].real_architecture
    assert record["seed"] == 7


@pytest.mark.parametrize(
    ("name", "stands_for", "architecture"),
    [
        ("kimi-k2.5", "moonshotai/Kimi-K2.5", "DeepseekV3ForCausalLM"),
        ("minimax-m2.5", "MiniMaxAI/MiniMax-M2.5", "MiniMaxM2ForCausalLM"),
        ("llama", "meta-llama/Llama-3.1-8B", "LlamaForCausalLM"),
    ],
)
def test_each_miniature_keeps_the_language_model_class_of_the_real_one(
    name: str, stands_for: str, architecture: str
) -> None:
    recipe = MINIATURES[name]
    assert recipe.stands_for == stands_for
    assert _config(name)["architectures"] == [architecture]
    assert recipe.real_config["architectures"] == [architecture]


def test_kimi_keeps_the_real_mla_latent_sizes_that_cpu_mla_needs() -> None:
    real = load_reference_config(KIMI_K25_CONFIG)["text_config"]
    config = _config("kimi-k2.5")
    for field in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
        assert config[field] == real[field], field
    assert config["kv_lora_rank"] + config["qk_rope_head_dim"] == 576
    assert config["q_lora_rank"] == real["q_lora_rank"]


def test_kimi_keeps_top8_routing_one_shared_expert_and_a_dense_first_layer() -> None:
    real = load_reference_config(KIMI_K25_CONFIG)["text_config"]
    config = _config("kimi-k2.5")
    assert config["num_experts_per_tok"] == real["num_experts_per_tok"] == 8
    assert config["n_shared_experts"] == 1
    assert config["first_k_dense_replace"] >= 1
    assert config["num_hidden_layers"] > config["first_k_dense_replace"]
    assert config["n_routed_experts"] > config["num_experts_per_tok"]
    assert config["model_type"] == "deepseek_v3"


def test_kimi_keeps_the_real_sigmoid_routing_with_its_correction_bias() -> None:
    config = _config("kimi-k2.5")
    assert (config["scoring_func"], config["topk_method"]) == ("sigmoid", "noaux_tc")
    biases = [s for s in MINIATURES["kimi-k2.5"].tensors if s.name.endswith("correction_bias")]
    moe_layers = config["num_hidden_layers"] - config["first_k_dense_replace"]
    assert len(biases) == moe_layers
    assert all(s.dtype is TensorDtype.FLOAT32 for s in biases)


def test_minimax_keeps_the_real_gqa_ratio_and_head_dim() -> None:
    real = load_reference_config(MINIMAX_M25_CONFIG)
    config = _config("minimax-m2.5")
    real_ratio = real["num_attention_heads"] // real["num_key_value_heads"]
    assert real_ratio == 6
    assert config["num_attention_heads"] == 6 * config["num_key_value_heads"]
    assert config["head_dim"] == real["head_dim"]
    assert config["rotary_dim"] == real["rotary_dim"]
    assert config["use_qk_norm"] is True
    assert config["qk_norm_type"] == real["qk_norm_type"]


def test_minimax_keeps_top8_routing_without_a_shared_expert() -> None:
    config = _config("minimax-m2.5")
    assert config["num_experts_per_tok"] == 8
    assert config["shared_intermediate_size"] == 0
    assert config["num_local_experts"] > 8


def test_minimax_records_the_deviations_the_cpu_engine_forces() -> None:
    config = _config("minimax-m2.5")
    deviations = config[MINIATURE_RECORD_KEY]["deviations"]
    assert "quantization_config" not in config
    assert deviations["quantization_config"]["real"]["quant_method"] == "fp8"
    assert deviations["scoring_func"] == {
        "real": "sigmoid",
        "miniature": "softmax",
        "why": deviations["scoring_func"]["why"],
    }
    assert config["use_mtp"] is False
    assert config["num_mtp_modules"] == 0
    assert len(config["attn_type_list"]) == config["num_hidden_layers"]


def test_llama_is_gqa_with_head_dim_64() -> None:
    config = _config("llama")
    assert config["hidden_size"] // config["num_attention_heads"] == 64
    assert config["num_attention_heads"] == 4 * config["num_key_value_heads"]


@pytest.mark.parametrize("name", NAMES)
def test_context_is_shrunk_for_a_cpu_kv_cache_and_the_real_one_recorded(name: str) -> None:
    config = _config(name)
    assert config["max_position_embeddings"] == 4096
    real = config[MINIATURE_RECORD_KEY]["deviations"]["max_position_embeddings"]["real"]
    assert real >= 131072
    assert "rope_scaling" not in config


@pytest.mark.parametrize("name", NAMES)
def test_attention_heads_are_at_least_64_wide_for_cpu_attention(name: str) -> None:
    config = _config(name)
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    assert head_dim >= 64


def _tensor_shapes(recipe: MiniatureRecipe) -> dict[str, tuple[int, ...]]:
    return {spec.name: spec.shape for spec in recipe.tensors}


@pytest.mark.parametrize("name", NAMES)
def test_embedding_and_head_shapes_follow_the_config(name: str) -> None:
    config = _config(name)
    shapes = _tensor_shapes(MINIATURES[name])
    expected = (config["vocab_size"], config["hidden_size"])
    assert shapes["model.embed_tokens.weight"] == expected
    assert shapes["lm_head.weight"] == expected
    assert config["tie_word_embeddings"] is False


@pytest.mark.parametrize("name", NAMES)
def test_tensor_names_are_unique(name: str) -> None:
    names = [spec.name for spec in MINIATURES[name].tensors]
    assert len(names) == len(set(names))


def test_kimi_writes_one_expert_set_per_moe_layer_and_a_dense_mlp_first() -> None:
    config = _config("kimi-k2.5")
    shapes = _tensor_shapes(MINIATURES["kimi-k2.5"])
    assert "model.layers.0.mlp.gate_proj.weight" in shapes
    assert "model.layers.0.mlp.gate.weight" not in shapes
    last = config["num_hidden_layers"] - 1
    experts = config["n_routed_experts"]
    assert shapes[f"model.layers.{last}.mlp.experts.{experts - 1}.down_proj.weight"] == (
        config["hidden_size"],
        config["moe_intermediate_size"],
    )
    assert shapes[f"model.layers.{last}.self_attn.kv_a_proj_with_mqa.weight"] == (
        config["kv_lora_rank"] + config["qk_rope_head_dim"],
        config["hidden_size"],
    )


@pytest.mark.parametrize("name", NAMES)
def test_weights_stay_between_a_few_and_a_few_tens_of_megabytes(name: str) -> None:
    size_bytes = sum(
        spec.numel * (2 if spec.dtype is TensorDtype.BFLOAT16 else 4)
        for spec in MINIATURES[name].tensors
    )
    assert 2 * 2**20 < size_bytes < 48 * 2**20
