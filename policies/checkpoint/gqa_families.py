"""Parsers for the GQA families: Llama/Qwen2/Qwen3, Qwen3-MoE, MiniMax-M2, GLM-4 MoE, gpt-oss.

Each reads what its family does differently (MoE layer rule, shared experts, sliding
layers, MTP) and cites the transformers config class and vLLM model file it follows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from policies.checkpoint.config_fields import nonnegative_int, positive_int
from policies.checkpoint.gqa_attention import gqa_attention, sliding_layers
from policies.checkpoint.model_spec import ModelFamily, ModelSpec, MoeSpec
from policies.checkpoint.module_names import (
    DEEPSEEK_MODULES,
    GPT_OSS_MODULES,
    LLAMA_MODULES,
    MINIMAX_MODULES,
    QWEN_MOE_MODULES,
)
from policies.checkpoint.spec_assembly import assemble_spec
from policies.errors import InvalidConfig, UnsupportedModel


def parse_llama_like(cfg: Mapping[str, Any], arch: str) -> ModelSpec:
    """Llama, Qwen2, Qwen3: dense GQA.

    transformers: LlamaConfig/Qwen2Config/Qwen3Config (num_key_value_heads defaults to
    num_attention_heads; head_dim defaults to hidden_size // heads, Qwen3Config to 128).
    Qwen2/Qwen3 sliding windows: `use_sliding_window`, `sliding_window`, `max_window_layers`
    (layers >= max_window_layers slide) or an explicit `layer_types`.
    vLLM: llama.py / qwen2.py / qwen3.py, QKVParallelLinear + MergedColumnParallelLinear.
    """
    layers = positive_int(cfg, "num_hidden_layers")
    window, sliding = sliding_layers(cfg, layers)
    attention = gqa_attention(
        cfg,
        head_dim_default=128 if arch == "Qwen3ForCausalLM" else None,
        bias=arch == "Qwen2ForCausalLM" or bool(cfg.get("attention_bias", False)),
        window=window,
        sliding=sliding,
    )
    return assemble_spec(
        cfg,
        arch,
        family=ModelFamily.DENSE,
        attention=attention,
        moe=None,
        dense_intermediate=positive_int(cfg, "intermediate_size"),
        num_dense_layers=layers,
        mtp_layers=0,
        names=LLAMA_MODULES,
    )


def parse_qwen3_moe(cfg: Mapping[str, Any], arch: str) -> ModelSpec:
    """Qwen3-MoE.

    transformers Qwen3MoeConfig: `num_experts`, `num_experts_per_tok`, `moe_intermediate_size`,
    `decoder_sparse_step`, `mlp_only_layers`; a layer is MoE when it is not in mlp_only_layers
    and (i + 1) % decoder_sparse_step == 0 (modeling_qwen3_moe.py). No shared expert.
    vLLM qwen3_moe.py: Qwen3MoeSparseMoeBlock -> FusedMoE.
    """
    layers = positive_int(cfg, "num_hidden_layers")
    step = positive_int(cfg, "decoder_sparse_step", 1)
    mlp_only = cfg.get("mlp_only_layers") or []
    if not isinstance(mlp_only, list) or not all(isinstance(i, int) for i in mlp_only):
        raise InvalidConfig("mlp_only_layers must be a list of layer indices")
    n_moe = sum(1 for i in range(layers) if i not in mlp_only and (i + 1) % step == 0)
    window, sliding = sliding_layers(cfg, layers)
    attention = gqa_attention(
        cfg, bias=bool(cfg.get("attention_bias", False)), window=window, sliding=sliding
    )
    moe = MoeSpec(
        num_experts=positive_int(cfg, "num_experts"),
        experts_per_token=positive_int(cfg, "num_experts_per_tok"),
        expert_intermediate_size=positive_int(cfg, "moe_intermediate_size"),
        shared_intermediate_size=0,
        num_moe_layers=n_moe,
    )
    return assemble_spec(
        cfg,
        arch,
        family=ModelFamily.MOE,
        attention=attention,
        moe=moe,
        dense_intermediate=positive_int(cfg, "intermediate_size") if n_moe < layers else 0,
        num_dense_layers=layers - n_moe,
        mtp_layers=0,
        names=QWEN_MOE_MODULES,
    )


def parse_minimax_m2(cfg: Mapping[str, Any], arch: str) -> ModelSpec:
    """MiniMax-M2 / M2.5.

    transformers MiniMaxM2Config: `num_local_experts`, `num_experts_per_tok`, and
    `intermediate_size` is the per-expert size (every layer is MoE; no dense MLP).
    `shared_intermediate_size` (0 in M2.5) and `attn_type_list` (1 = full softmax attention;
    0 would be MiniMax-01's lightning attention) are read from the raw config.
    vLLM minimax_m2.py: MiniMaxM2Attention splits heads and KV heads like Llama (KV heads
    replicated when TP > kv heads); MiniMaxM2MoE -> FusedMoE over `intermediate_size`.
    Its q_norm/k_norm (MiniMaxText01RMSNormTP) span all heads whatever `use_qk_norm` says,
    so TP adds one all-reduce per layer.
    """
    layers = positive_int(cfg, "num_hidden_layers")
    attn_types = cfg.get("attn_type_list")
    if isinstance(attn_types, list) and any(t != 1 for t in attn_types):
        raise UnsupportedModel(
            "MiniMaxM2ForCausalLM with linear-attention layers (attn_type_list entries other "
            "than 1) is not supported"
        )
    shared = nonnegative_int(cfg, "shared_intermediate_size", 0)
    moe = MoeSpec(
        num_experts=positive_int(cfg, "num_local_experts"),
        experts_per_token=positive_int(cfg, "num_experts_per_tok"),
        expert_intermediate_size=positive_int(cfg, "intermediate_size"),
        shared_intermediate_size=shared,
        num_moe_layers=layers,
    )
    attention = replace(gqa_attention(cfg), tp_qk_norm_all_reduce=True)
    mtp = nonnegative_int(cfg, "num_mtp_modules", 0) if cfg.get("use_mtp", False) else 0
    return assemble_spec(
        cfg,
        arch,
        family=ModelFamily.MOE,
        attention=attention,
        moe=moe,
        dense_intermediate=0,
        num_dense_layers=0,
        mtp_layers=mtp,
        names=MINIMAX_MODULES,
    )


def parse_glm4_moe(cfg: Mapping[str, Any], arch: str) -> ModelSpec:
    """GLM-4.5 / 4.6 / 4.7 (Glm4MoeForCausalLM): GQA + MoE with shared experts.

    transformers Glm4MoeConfig: `num_key_value_heads`, `head_dim` (128 in GLM-4.5; defaults
    to hidden_size // heads), `partial_rotary_factor`, `n_routed_experts`, `n_shared_experts`,
    `moe_intermediate_size`, `first_k_dense_replace`, `num_nextn_predict_layers`.
    vLLM glm4_moe.py: Glm4MoeAttention as Llama; Glm4MoE shared experts split by TP.
    """
    layers = positive_int(cfg, "num_hidden_layers")
    first_dense = nonnegative_int(cfg, "first_k_dense_replace", 1)
    n_moe = max(0, layers - first_dense)
    expert_inter = positive_int(cfg, "moe_intermediate_size")
    moe = MoeSpec(
        num_experts=positive_int(cfg, "n_routed_experts"),
        experts_per_token=positive_int(cfg, "num_experts_per_tok"),
        expert_intermediate_size=expert_inter,
        shared_intermediate_size=nonnegative_int(cfg, "n_shared_experts", 0) * expert_inter,
        num_moe_layers=n_moe,
    )
    attention = gqa_attention(cfg, bias=bool(cfg.get("attention_bias", False)))
    return assemble_spec(
        cfg,
        arch,
        family=ModelFamily.MOE,
        attention=attention,
        moe=moe,
        dense_intermediate=positive_int(cfg, "intermediate_size") if first_dense else 0,
        num_dense_layers=layers - n_moe,
        mtp_layers=nonnegative_int(cfg, "num_nextn_predict_layers", 0),
        names=DEEPSEEK_MODULES,
    )


def parse_gpt_oss(cfg: Mapping[str, Any], arch: str) -> ModelSpec:
    """gpt-oss-20b / 120b: GQA with alternating sliding (128) and full layers, MXFP4 experts.

    transformers GptOssConfig: `num_local_experts`, `num_experts_per_tok`, `intermediate_size`
    (per expert), `head_dim` (64), `sliding_window`, `layer_types` (default: even layers
    slide). vLLM gpt_oss.py: every layer is MoE; MXFP4 pads the expert intermediate size
    itself, so there is no block alignment rule.
    """
    layers = positive_int(cfg, "num_hidden_layers")
    window = positive_int(cfg, "sliding_window", 128)
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and len(layer_types) == layers:
        sliding = tuple(i for i, t in enumerate(layer_types) if t == "sliding_attention")
    else:
        sliding = tuple(i for i in range(layers) if (i + 1) % 2)
    moe = MoeSpec(
        num_experts=positive_int(cfg, "num_local_experts"),
        experts_per_token=positive_int(cfg, "num_experts_per_tok"),
        expert_intermediate_size=positive_int(cfg, "intermediate_size"),
        shared_intermediate_size=0,
        num_moe_layers=layers,
    )
    attention = gqa_attention(cfg, bias=True, window=window, sliding=sliding)
    return assemble_spec(
        cfg,
        arch,
        family=ModelFamily.MOE,
        attention=attention,
        moe=moe,
        dense_intermediate=0,
        num_dense_layers=0,
        mtp_layers=0,
        names=GPT_OSS_MODULES,
    )
