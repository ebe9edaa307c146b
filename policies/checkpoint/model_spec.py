"""The typed, normalised model spec: what the policy knows about a model.

Parsed once from a Hugging Face `config.json` (`policies/checkpoint/hf_config.py`) and read
everywhere else; nothing downstream looks at the raw config again.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from policies.checkpoint.quantization import QuantSpec


class ModelFamily(StrEnum):
    DENSE = "dense"
    MOE = "moe"


class AttentionKind(StrEnum):
    MHA = "mha"
    """One KV head per query head."""
    GQA = "gqa"
    """Fewer KV heads than query heads (MQA is GQA with one KV head)."""
    MLA = "mla"
    """Multi-head latent attention: one compressed latent per token, not per head."""


@dataclass(frozen=True)
class MlaDims:
    """MLA sizes, as in DeepseekV3Config."""

    q_lora_rank: int | None
    """None when queries are projected directly (DeepSeek-V2-Lite)."""
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    @property
    def latent_dim(self) -> int:
        """What the KV cache stores per token per layer: the latent plus the RoPE key."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True)
class SparseIndexerDims:
    """The lightning indexer of DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5)."""

    n_heads: int
    head_dim: int
    top_k: int


@dataclass(frozen=True)
class AttentionSpec:
    kind: AttentionKind
    num_heads: int
    num_kv_heads: int
    """For MLA this is the config's value; the cache holds one latent regardless."""
    head_dim: int
    """Per-head size of q/k/v for MHA/GQA; for MLA, qk_nope + qk_rope."""
    v_head_dim: int
    mla: MlaDims | None = None
    indexer: SparseIndexerDims | None = None
    sliding_window: int | None = None
    sliding_layers: tuple[int, ...] = ()
    """Indices of layers that attend only to the last `sliding_window` tokens."""
    bias: bool = False
    tp_qk_norm_all_reduce: bool = False
    """q and k are RMS-normed over all heads, not per head (MiniMax-M2), so a forward under
    TP all-reduces each token's variance across the TP group once per layer (vLLM
    `MiniMaxText01RMSNormTP.forward_qk`, one all-reduce of q's and k's variances together,
    in every version that serves MiniMax-M2: 0.14.1 to 0.32)."""

    @property
    def num_sliding_layers(self) -> int:
        return len(self.sliding_layers) if self.sliding_window is not None else 0

    @property
    def has_sliding_full_mix(self) -> bool:
        return self.num_sliding_layers > 0


@dataclass(frozen=True)
class MoeSpec:
    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    shared_intermediate_size: int
    """Total intermediate size of the shared experts (0 when there are none)."""
    num_moe_layers: int


@dataclass(frozen=True)
class ModelSpec:
    """What the policy needs to know about a model, independent of any cluster."""

    architecture: str
    """The language model's class, e.g. "DeepseekV3ForCausalLM"."""
    model_type: str
    wrapper_architecture: str | None
    """The multimodal wrapper vLLM loads (e.g. KimiK25ForConditionalGeneration), if any."""
    family: ModelFamily
    hidden_size: int
    num_layers: int
    vocab_size: int
    max_context: int
    dense_intermediate_size: int
    """Intermediate size of dense-layer MLPs (0 when no layer has one)."""
    num_dense_layers: int
    attention: AttentionSpec
    moe: MoeSpec | None
    quantization: QuantSpec
    dtype_bytes: int
    """Bytes per unquantized parameter and per KV element at kv_cache_dtype "auto"."""
    tie_word_embeddings: bool
    mtp_layers: int
    """Multi-token-prediction layers the config declares. vLLM loads them only for speculative
    decoding, and some checkpoints declare them without shipping weights (MiniMax-M2.5), so
    the policy never counts them in memory."""
    supports_pp: bool
    extra_params: int = 0
    """Parameters outside the language model (a vision tower), estimated from its config."""
