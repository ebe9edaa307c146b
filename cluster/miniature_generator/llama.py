"""Miniature of a dense Llama (meta-llama/Llama-3.1-8B's layout): GQA 4:1, no MoE.

The dense baseline beside the two MoE story models: it exercises the plain attention path and
is the cheapest engine to start.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from cluster.miniature_generator.recipe import (
    REMOVED,
    ConfigChange,
    Deviation,
    MiniatureRecipe,
    TensorInit,
    TensorSpec,
)
from cluster.miniature_generator.shared_changes import (
    SHRUNK,
    context_change,
    tokenizer_deviation,
    vocabulary_changes,
)
from cluster.miniature_generator.special_tokens import MODEL_VOCAB_SIZE

NAME = "llama"

# The fields of meta-llama/Llama-3.1-8B's public config.json. No copy of that file ships in
# reference_configs/, so the values the miniature is compared with are written out here.
REAL_CONFIG: MappingProxyType[str, Any] = MappingProxyType(
    {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 128000,
        "eos_token_id": 128001,
        "hidden_act": "silu",
        "hidden_size": 4096,
        "initializer_range": 0.02,
        "intermediate_size": 14336,
        "max_position_embeddings": 131072,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": {
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "vocab_size": 128256,
    }
)


@dataclass(frozen=True)
class _Shape:
    hidden: int = 512
    intermediate: int = 1024
    layers: int = 2
    heads: int = 8
    kv_heads: int = 2
    vocab: int = MODEL_VOCAB_SIZE

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


SHAPE = _Shape()


def tensors(s: _Shape = SHAPE) -> tuple[TensorSpec, ...]:
    specs = [TensorSpec("model.embed_tokens.weight", (s.vocab, s.hidden))]
    for layer in range(s.layers):
        prefix = f"model.layers.{layer}"
        specs += [
            TensorSpec(f"{prefix}.input_layernorm.weight", (s.hidden,), TensorInit.ONES),
            TensorSpec(f"{prefix}.post_attention_layernorm.weight", (s.hidden,), TensorInit.ONES),
            TensorSpec(f"{prefix}.self_attn.q_proj.weight", (s.heads * s.head_dim, s.hidden)),
            TensorSpec(f"{prefix}.self_attn.k_proj.weight", (s.kv_heads * s.head_dim, s.hidden)),
            TensorSpec(f"{prefix}.self_attn.v_proj.weight", (s.kv_heads * s.head_dim, s.hidden)),
            TensorSpec(f"{prefix}.self_attn.o_proj.weight", (s.hidden, s.heads * s.head_dim)),
            TensorSpec(f"{prefix}.mlp.gate_proj.weight", (s.intermediate, s.hidden)),
            TensorSpec(f"{prefix}.mlp.up_proj.weight", (s.intermediate, s.hidden)),
            TensorSpec(f"{prefix}.mlp.down_proj.weight", (s.hidden, s.intermediate)),
        ]
    specs += [
        TensorSpec("model.norm.weight", (s.hidden,), TensorInit.ONES),
        TensorSpec("lm_head.weight", (s.vocab, s.hidden)),
    ]
    return tuple(specs)


def _changes(s: _Shape) -> tuple[ConfigChange, ...]:
    return (
        ConfigChange("hidden_size", s.hidden, SHRUNK),
        ConfigChange("intermediate_size", s.intermediate, SHRUNK),
        ConfigChange("num_hidden_layers", s.layers, SHRUNK),
        ConfigChange("num_attention_heads", s.heads, SHRUNK + "; GQA ratio 4:1 kept"),
        ConfigChange("num_key_value_heads", s.kv_heads, SHRUNK + "; GQA ratio 4:1 kept"),
        *vocabulary_changes(),
        context_change(),
        ConfigChange(
            "rope_scaling",
            REMOVED,
            "llama3 scaling stretches 8,192 trained positions to 131,072; the miniature's "
            "context is 4,096, which plain RoPE covers",
        ),
    )


def recipe() -> MiniatureRecipe:
    return MiniatureRecipe(
        name=NAME,
        stands_for="meta-llama/Llama-3.1-8B",
        real_architecture="LlamaForCausalLM",
        real_config=REAL_CONFIG,
        changes=_changes(SHAPE),
        extra_deviations=(
            Deviation(
                "head_dim",
                128,
                SHAPE.head_dim,
                "follows from the shrunk hidden size; vLLM's CPU attention needs 64 or more",
            ),
            tokenizer_deviation("Llama 3's tiktoken-style BPE, 128,256 ids"),
        ),
        tensors=tensors(SHAPE),
    )
