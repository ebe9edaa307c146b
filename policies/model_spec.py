"""A Hugging Face `config.json`, parsed once into a typed, normalised model spec.

Field names come from the installed `transformers` config classes
(`transformers/models/<type>/configuration_<type>.py`, transformers 5.x) and from how vLLM's
model classes read them (`vllm/model_executor/models/<file>.py`, vLLM 0.32); each family
parser below cites its sources. An architecture not in `SUPPORTED_ARCHITECTURES` is refused
with `UnsupportedModel`: the rules differ per family, and a silent guess would admit a model
that vLLM then refuses after a long download.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from policies.errors import InvalidConfig, UnsupportedModel
from policies.module_groups import ModuleGroup
from policies.quantization import QuantSpec, parse_quantization


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


Parser = Callable[[Mapping[str, Any], str], ModelSpec]

_DTYPE_BYTES: Final = {
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "float32": 4,
    "float": 4,
}


def load_model_spec(path: Path) -> ModelSpec:
    """Read a `config.json`, or the one inside a model directory, and parse it."""
    config_path = path / "config.json" if path.is_dir() else path
    try:
        text = config_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidConfig(f"cannot read {config_path}: {exc.strerror or exc}") from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidConfig(
            f"{config_path} is not valid JSON: {exc.msg} at line {exc.lineno}"
        ) from exc
    if not isinstance(raw, Mapping):
        raise InvalidConfig(f"{config_path} must hold a JSON object")
    return parse_hf_config(raw)


def parse_hf_config(cfg: Mapping[str, Any]) -> ModelSpec:
    """Parse a Hugging Face config mapping; raises `UnsupportedModel` or `InvalidConfig`."""
    architecture = _architecture(cfg, "architectures")
    wrapper = _WRAPPERS.get(architecture)
    if wrapper is not None:
        text = cfg.get("text_config")
        if not isinstance(text, Mapping):
            raise InvalidConfig(f"{architecture} needs a text_config object")
        merged = dict(text)
        # Kimi-K2.5 repeats quantization_config at both levels; the wrapper's is authoritative
        # for vLLM, which reads the top-level config.
        if "quantization_config" in cfg:
            merged["quantization_config"] = cfg["quantization_config"]
        for key in ("torch_dtype", "dtype"):
            if key not in merged and key in cfg:
                merged[key] = cfg[key]
        text_arch = (
            _architecture(text, "text_config.architectures")
            if "architectures" in text
            else wrapper.default_text_architecture
        )
        if text_arch not in _PARSERS:
            raise UnsupportedModel(
                f"{architecture} wraps text architecture {text_arch!r}, which is not supported"
            )
        spec = _PARSERS[text_arch](merged, text_arch)
        return _with_wrapper(spec, architecture, wrapper.extra_params(cfg))
    if architecture in _PARSERS:
        return _PARSERS[architecture](cfg, architecture)
    hint = " (it wraps a text_config)" if isinstance(cfg.get("text_config"), Mapping) else ""
    raise UnsupportedModel(
        f"architecture {architecture!r}{hint} is not supported; supported: "
        + ", ".join(SUPPORTED_ARCHITECTURES)
    )


# --- family parsers -----------------------------------------------------------------------


def _parse_llama_like(cfg: Mapping[str, Any], arch: str) -> ModelSpec:
    """Llama, Qwen2, Qwen3: dense GQA.

    transformers: LlamaConfig/Qwen2Config/Qwen3Config (num_key_value_heads defaults to
    num_attention_heads; head_dim defaults to hidden_size // heads, Qwen3Config to 128).
    Qwen2/Qwen3 sliding windows: `use_sliding_window`, `sliding_window`, `max_window_layers`
    (layers >= max_window_layers slide) or an explicit `layer_types`.
    vLLM: llama.py / qwen2.py / qwen3.py, QKVParallelLinear + MergedColumnParallelLinear.
    """
    layers = _pos_int(cfg, "num_hidden_layers")
    window, sliding = _sliding_layers(cfg, layers)
    attention = _gqa_attention(
        cfg,
        head_dim_default=128 if arch == "Qwen3ForCausalLM" else None,
        bias=arch == "Qwen2ForCausalLM" or bool(cfg.get("attention_bias", False)),
        window=window,
        sliding=sliding,
    )
    return _spec(
        cfg,
        arch,
        family=ModelFamily.DENSE,
        attention=attention,
        moe=None,
        dense_intermediate=_pos_int(cfg, "intermediate_size"),
        num_dense_layers=layers,
        mtp_layers=0,
        names=_LLAMA_NAMES,
    )


def _parse_qwen3_moe(cfg: Mapping[str, Any], arch: str) -> ModelSpec:
    """Qwen3-MoE.

    transformers Qwen3MoeConfig: `num_experts`, `num_experts_per_tok`, `moe_intermediate_size`,
    `decoder_sparse_step`, `mlp_only_layers`; a layer is MoE when it is not in mlp_only_layers
    and (i + 1) % decoder_sparse_step == 0 (modeling_qwen3_moe.py). No shared expert.
    vLLM qwen3_moe.py: Qwen3MoeSparseMoeBlock -> FusedMoE.
    """
    layers = _pos_int(cfg, "num_hidden_layers")
    step = _pos_int(cfg, "decoder_sparse_step", 1)
    mlp_only = cfg.get("mlp_only_layers") or []
    if not isinstance(mlp_only, list) or not all(isinstance(i, int) for i in mlp_only):
        raise InvalidConfig("mlp_only_layers must be a list of layer indices")
    n_moe = sum(1 for i in range(layers) if i not in mlp_only and (i + 1) % step == 0)
    window, sliding = _sliding_layers(cfg, layers)
    attention = _gqa_attention(
        cfg, bias=bool(cfg.get("attention_bias", False)), window=window, sliding=sliding
    )
    moe = MoeSpec(
        num_experts=_pos_int(cfg, "num_experts"),
        experts_per_token=_pos_int(cfg, "num_experts_per_tok"),
        expert_intermediate_size=_pos_int(cfg, "moe_intermediate_size"),
        shared_intermediate_size=0,
        num_moe_layers=n_moe,
    )
    return _spec(
        cfg,
        arch,
        family=ModelFamily.MOE,
        attention=attention,
        moe=moe,
        dense_intermediate=_pos_int(cfg, "intermediate_size") if n_moe < layers else 0,
        num_dense_layers=layers - n_moe,
        mtp_layers=0,
        names=_QWEN_MOE_NAMES,
    )


def _parse_minimax_m2(cfg: Mapping[str, Any], arch: str) -> ModelSpec:
    """MiniMax-M2 / M2.5.

    transformers MiniMaxM2Config: `num_local_experts`, `num_experts_per_tok`, and
    `intermediate_size` is the per-expert size (every layer is MoE; no dense MLP).
    `shared_intermediate_size` (0 in M2.5) and `attn_type_list` (1 = full softmax attention;
    0 would be MiniMax-01's lightning attention) are read from the raw config.
    vLLM minimax_m2.py: MiniMaxM2Attention splits heads and KV heads like Llama (KV heads
    replicated when TP > kv heads); MiniMaxM2MoE -> FusedMoE over `intermediate_size`.
    """
    layers = _pos_int(cfg, "num_hidden_layers")
    attn_types = cfg.get("attn_type_list")
    if isinstance(attn_types, list) and any(t != 1 for t in attn_types):
        raise UnsupportedModel(
            "MiniMaxM2ForCausalLM with linear-attention layers (attn_type_list entries other "
            "than 1) is not supported"
        )
    shared = _nonneg_int(cfg, "shared_intermediate_size", 0)
    moe = MoeSpec(
        num_experts=_pos_int(cfg, "num_local_experts"),
        experts_per_token=_pos_int(cfg, "num_experts_per_tok"),
        expert_intermediate_size=_pos_int(cfg, "intermediate_size"),
        shared_intermediate_size=shared,
        num_moe_layers=layers,
    )
    attention = _gqa_attention(cfg)
    mtp = _nonneg_int(cfg, "num_mtp_modules", 0) if cfg.get("use_mtp", False) else 0
    return _spec(
        cfg,
        arch,
        family=ModelFamily.MOE,
        attention=attention,
        moe=moe,
        dense_intermediate=0,
        num_dense_layers=0,
        mtp_layers=mtp,
        names=_MINIMAX_NAMES,
    )


def _parse_deepseek_mla(cfg: Mapping[str, Any], arch: str) -> ModelSpec:
    """DeepSeek-V2/V3/V3.2, Kimi-K2.x text model, GLM-5: MLA + MoE (+ DSA indexer).

    transformers DeepseekV3Config / GlmMoeDsaConfig: `q_lora_rank` (None allowed),
    `kv_lora_rank`, `qk_nope_head_dim`, `qk_rope_head_dim`, `v_head_dim`, `n_routed_experts`,
    `n_shared_experts`, `moe_intermediate_size`, `first_k_dense_replace`, `intermediate_size`
    (dense layers), `num_nextn_predict_layers` (MTP); GLM-5 adds `index_topk`,
    `index_head_dim`, `index_n_heads`. DeepSeek's remote code also uses `moe_layer_freq`.
    vLLM deepseek_v2.py: DeepseekV2MLAAttention keeps fused_qkv_a_proj / kv_a_proj_with_mqa
    replicated (disable_tp) and splits q_b_proj, kv_b_proj (ColumnParallel) and o_proj
    (RowParallel) by TP; shared experts are a DeepseekV2MLP of
    moe_intermediate_size * n_shared_experts split by TP; the Indexer's wq_b and wk are
    replicated.
    """
    heads = _pos_int(cfg, "num_attention_heads")
    layers = _pos_int(cfg, "num_hidden_layers")
    q_lora = cfg.get("q_lora_rank")
    if q_lora is not None and (not isinstance(q_lora, int) or q_lora <= 0):
        raise InvalidConfig(f"q_lora_rank must be a positive integer or null, got {q_lora!r}")
    mla = MlaDims(
        q_lora_rank=q_lora,
        kv_lora_rank=_pos_int(cfg, "kv_lora_rank"),
        qk_nope_head_dim=_pos_int(cfg, "qk_nope_head_dim"),
        qk_rope_head_dim=_pos_int(cfg, "qk_rope_head_dim"),
        v_head_dim=_pos_int(cfg, "v_head_dim"),
    )
    indexer = None
    if "index_topk" in cfg or arch in ("GlmMoeDsaForCausalLM", "DeepseekV32ForCausalLM"):
        indexer = SparseIndexerDims(
            n_heads=_pos_int(cfg, "index_n_heads", 64),
            head_dim=_pos_int(cfg, "index_head_dim", 128),
            top_k=_pos_int(cfg, "index_topk", 2048),
        )
    attention = AttentionSpec(
        kind=AttentionKind.MLA,
        num_heads=heads,
        num_kv_heads=_pos_int(cfg, "num_key_value_heads", heads),
        head_dim=mla.qk_nope_head_dim + mla.qk_rope_head_dim,
        v_head_dim=mla.v_head_dim,
        mla=mla,
        indexer=indexer,
    )
    first_dense = _nonneg_int(cfg, "first_k_dense_replace", 0)
    freq = _pos_int(cfg, "moe_layer_freq", 1)
    n_experts = _nonneg_int(cfg, "n_routed_experts", 0)
    mlp_types = cfg.get("mlp_layer_types")
    if isinstance(mlp_types, list) and len(mlp_types) == layers:
        n_moe = sum(1 for t in mlp_types if t == "sparse")
    else:
        n_moe = sum(1 for i in range(layers) if i >= first_dense and i % freq == 0)
    if n_experts == 0:
        n_moe = 0
    moe = None
    if n_moe:
        shared = _nonneg_int(cfg, "n_shared_experts", 0)
        expert_inter = _pos_int(cfg, "moe_intermediate_size")
        moe = MoeSpec(
            num_experts=n_experts,
            experts_per_token=_pos_int(cfg, "num_experts_per_tok"),
            expert_intermediate_size=expert_inter,
            shared_intermediate_size=shared * expert_inter,
            num_moe_layers=n_moe,
        )
    n_dense = layers - n_moe
    return _spec(
        cfg,
        arch,
        family=ModelFamily.MOE if moe else ModelFamily.DENSE,
        attention=attention,
        moe=moe,
        dense_intermediate=_pos_int(cfg, "intermediate_size") if n_dense else 0,
        num_dense_layers=n_dense,
        mtp_layers=_nonneg_int(cfg, "num_nextn_predict_layers", 0),
        names=_DEEPSEEK_NAMES,
    )


def _parse_glm4_moe(cfg: Mapping[str, Any], arch: str) -> ModelSpec:
    """GLM-4.5 / 4.6 / 4.7 (Glm4MoeForCausalLM): GQA + MoE with shared experts.

    transformers Glm4MoeConfig: `num_key_value_heads`, `head_dim` (128 in GLM-4.5; defaults
    to hidden_size // heads), `partial_rotary_factor`, `n_routed_experts`, `n_shared_experts`,
    `moe_intermediate_size`, `first_k_dense_replace`, `num_nextn_predict_layers`.
    vLLM glm4_moe.py: Glm4MoeAttention as Llama; Glm4MoE shared experts split by TP.
    """
    layers = _pos_int(cfg, "num_hidden_layers")
    first_dense = _nonneg_int(cfg, "first_k_dense_replace", 1)
    n_moe = max(0, layers - first_dense)
    expert_inter = _pos_int(cfg, "moe_intermediate_size")
    moe = MoeSpec(
        num_experts=_pos_int(cfg, "n_routed_experts"),
        experts_per_token=_pos_int(cfg, "num_experts_per_tok"),
        expert_intermediate_size=expert_inter,
        shared_intermediate_size=_nonneg_int(cfg, "n_shared_experts", 0) * expert_inter,
        num_moe_layers=n_moe,
    )
    attention = _gqa_attention(cfg, bias=bool(cfg.get("attention_bias", False)))
    return _spec(
        cfg,
        arch,
        family=ModelFamily.MOE,
        attention=attention,
        moe=moe,
        dense_intermediate=_pos_int(cfg, "intermediate_size") if first_dense else 0,
        num_dense_layers=layers - n_moe,
        mtp_layers=_nonneg_int(cfg, "num_nextn_predict_layers", 0),
        names=_DEEPSEEK_NAMES,
    )


def _parse_gpt_oss(cfg: Mapping[str, Any], arch: str) -> ModelSpec:
    """gpt-oss-20b / 120b: GQA with alternating sliding (128) and full layers, MXFP4 experts.

    transformers GptOssConfig: `num_local_experts`, `num_experts_per_tok`, `intermediate_size`
    (per expert), `head_dim` (64), `sliding_window`, `layer_types` (default: even layers
    slide). vLLM gpt_oss.py: every layer is MoE; MXFP4 pads the expert intermediate size
    itself, so there is no block alignment rule.
    """
    layers = _pos_int(cfg, "num_hidden_layers")
    window = _pos_int(cfg, "sliding_window", 128)
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and len(layer_types) == layers:
        sliding = tuple(i for i, t in enumerate(layer_types) if t == "sliding_attention")
    else:
        sliding = tuple(i for i in range(layers) if (i + 1) % 2)
    moe = MoeSpec(
        num_experts=_pos_int(cfg, "num_local_experts"),
        experts_per_token=_pos_int(cfg, "num_experts_per_tok"),
        expert_intermediate_size=_pos_int(cfg, "intermediate_size"),
        shared_intermediate_size=0,
        num_moe_layers=layers,
    )
    attention = _gqa_attention(cfg, bias=True, window=window, sliding=sliding)
    return _spec(
        cfg,
        arch,
        family=ModelFamily.MOE,
        attention=attention,
        moe=moe,
        dense_intermediate=0,
        num_dense_layers=0,
        mtp_layers=0,
        names=_GPT_OSS_NAMES,
    )


def _gqa_attention(
    cfg: Mapping[str, Any],
    *,
    head_dim_default: int | None = None,
    bias: bool = False,
    window: int | None = None,
    sliding: tuple[int, ...] = (),
) -> AttentionSpec:
    """Llama-style attention (MHA/GQA/MQA): every GQA family reads the same four fields.

    transformers defaults `num_key_value_heads` to the head count and `head_dim` to
    hidden_size // heads unless the family says otherwise (Qwen3: 128).
    """
    heads = _pos_int(cfg, "num_attention_heads")
    kv_heads = _pos_int(cfg, "num_key_value_heads", heads)
    default = head_dim_default or _pos_int(cfg, "hidden_size") // heads
    head_dim = _pos_int(cfg, "head_dim", default)
    return AttentionSpec(
        kind=_gqa_kind(heads, kv_heads),
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        v_head_dim=head_dim,
        sliding_window=window,
        sliding_layers=sliding,
        bias=bias,
    )


# --- wrappers -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Wrapper:
    default_text_architecture: str
    extra_params: Callable[[Mapping[str, Any]], int]


def _kimi_vision_params(cfg: Mapping[str, Any]) -> int:
    """MoonViT tower + projector of Kimi-K2.5 (transformers Kimi_K25VisionConfig fields)."""
    vision = cfg.get("vision_config")
    if not isinstance(vision, Mapping):
        return 0
    width = vision.get("vt_hidden_size", vision.get("hidden_size", 0))
    depth = vision.get("vt_num_hidden_layers", vision.get("num_hidden_layers", 0))
    inter = vision.get("vt_intermediate_size", vision.get("intermediate_size", 0))
    text_hidden = vision.get("text_hidden_size", 0)
    values = (width, depth, inter, text_hidden)
    if not all(isinstance(v, int) and v >= 0 for v in values):
        return 0
    w, d, i, t = (int(v) for v in values)
    merged = w * 4  # 2x2 patch merge before the projector
    return d * (4 * w * w + 2 * w * i) + merged * merged + merged * t


_WRAPPERS: Final[Mapping[str, _Wrapper]] = {
    "KimiK25ForConditionalGeneration": _Wrapper("DeepseekV3ForCausalLM", _kimi_vision_params),
}


def _with_wrapper(spec: ModelSpec, wrapper: str, extra: int) -> ModelSpec:
    from dataclasses import replace

    return replace(
        spec,
        wrapper_architecture=wrapper,
        extra_params=spec.extra_params + extra,
        supports_pp=spec.supports_pp and wrapper in _PP_ARCHITECTURES,
    )


# --- registry -----------------------------------------------------------------------------

# Representative module names per architecture, to apply a quantization ignore list per group.
_LLAMA_NAMES: Final = {
    ModuleGroup.ATTENTION: "model.layers.1.self_attn.q_proj",
    ModuleGroup.DENSE_MLP: "model.layers.1.mlp.gate_proj",
}
_QWEN_MOE_NAMES: Final = {
    ModuleGroup.ATTENTION: "model.layers.1.self_attn.q_proj",
    ModuleGroup.DENSE_MLP: "model.layers.1.mlp.gate_proj",
    ModuleGroup.ROUTED_EXPERTS: "model.layers.1.mlp.experts.0.gate_proj",
}
_MINIMAX_NAMES: Final = {
    ModuleGroup.ATTENTION: "model.layers.1.self_attn.q_proj",
    ModuleGroup.SHARED_EXPERT: "model.layers.1.block_sparse_moe.shared_experts.gate_proj",
    ModuleGroup.ROUTED_EXPERTS: "model.layers.1.block_sparse_moe.experts.0.w1",
}
_DEEPSEEK_NAMES: Final = {
    ModuleGroup.ATTENTION: "model.layers.1.self_attn.q_b_proj",
    ModuleGroup.DENSE_MLP: "model.layers.0.mlp.gate_proj",
    ModuleGroup.SHARED_EXPERT: "model.layers.1.mlp.shared_experts.gate_proj",
    ModuleGroup.ROUTED_EXPERTS: "model.layers.1.mlp.experts.0.gate_proj",
}
_GPT_OSS_NAMES: Final = {
    ModuleGroup.ATTENTION: "model.layers.1.self_attn.q_proj",
    ModuleGroup.ROUTED_EXPERTS: "model.layers.1.mlp.experts",
}

_PARSERS: Final[Mapping[str, Parser]] = {
    "LlamaForCausalLM": _parse_llama_like,
    "Qwen2ForCausalLM": _parse_llama_like,
    "Qwen3ForCausalLM": _parse_llama_like,
    "Qwen3MoeForCausalLM": _parse_qwen3_moe,
    "MiniMaxM2ForCausalLM": _parse_minimax_m2,
    "DeepseekV2ForCausalLM": _parse_deepseek_mla,
    "DeepseekV3ForCausalLM": _parse_deepseek_mla,
    "DeepseekV32ForCausalLM": _parse_deepseek_mla,
    "GlmMoeDsaForCausalLM": _parse_deepseek_mla,
    "Glm4MoeForCausalLM": _parse_glm4_moe,
    "GptOssForCausalLM": _parse_gpt_oss,
}

# Model classes that implement SupportsPP in vLLM 0.32 (checked in each model file).
_PP_ARCHITECTURES: Final = frozenset(
    {
        "LlamaForCausalLM",
        "Qwen2ForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM",
        "MiniMaxM2ForCausalLM",
        "DeepseekV2ForCausalLM",
        "DeepseekV3ForCausalLM",
        "DeepseekV32ForCausalLM",
        "GlmMoeDsaForCausalLM",
        "Glm4MoeForCausalLM",
        "GptOssForCausalLM",
        "KimiK25ForConditionalGeneration",
    }
)

SUPPORTED_ARCHITECTURES: Final[tuple[str, ...]] = tuple(sorted({*_PARSERS, *_WRAPPERS}))


# --- field readers ------------------------------------------------------------------------


def _spec(
    cfg: Mapping[str, Any],
    arch: str,
    *,
    family: ModelFamily,
    attention: AttentionSpec,
    moe: MoeSpec | None,
    dense_intermediate: int,
    num_dense_layers: int,
    mtp_layers: int,
    names: Mapping[ModuleGroup, str],
) -> ModelSpec:
    dtype_bytes = _dtype_bytes(cfg)
    model_type = cfg.get("model_type")
    return ModelSpec(
        architecture=arch,
        model_type=model_type if isinstance(model_type, str) else "",
        wrapper_architecture=None,
        family=family,
        hidden_size=_pos_int(cfg, "hidden_size"),
        num_layers=_pos_int(cfg, "num_hidden_layers"),
        vocab_size=_pos_int(cfg, "vocab_size"),
        max_context=_pos_int(cfg, "max_position_embeddings"),
        dense_intermediate_size=dense_intermediate,
        num_dense_layers=num_dense_layers,
        attention=attention,
        moe=moe,
        quantization=parse_quantization(cfg.get("quantization_config"), names, dtype_bytes * 8),
        dtype_bytes=dtype_bytes,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        mtp_layers=mtp_layers,
        supports_pp=arch in _PP_ARCHITECTURES,
    )


def _architecture(cfg: Mapping[str, Any], field: str) -> str:
    archs = cfg.get("architectures")
    if (
        not isinstance(archs, Sequence)
        or isinstance(archs, str)
        or not archs
        or not isinstance(archs[0], str)
    ):
        raise InvalidConfig(f"{field} must be a non-empty list of class names, got {archs!r}")
    return archs[0]


def _dtype_bytes(cfg: Mapping[str, Any]) -> int:
    raw = cfg.get("torch_dtype", cfg.get("dtype", "bfloat16"))
    name = str(raw).removeprefix("torch.")
    if name not in _DTYPE_BYTES:
        raise InvalidConfig(f"torch_dtype {raw!r} is not one of {sorted(_DTYPE_BYTES)}")
    return _DTYPE_BYTES[name]


def _pos_int(cfg: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = cfg.get(key, default)
    if value is None and default is not None:
        value = default
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        missing = key not in cfg
        raise InvalidConfig(
            f"config field {key} is missing"
            if missing and default is None
            else f"config field {key} must be a positive integer, got {value!r}"
        )
    return value


def _nonneg_int(cfg: Mapping[str, Any], key: str, default: int) -> int:
    value = cfg.get(key, default)
    if value is None:
        value = default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidConfig(f"config field {key} must be a non-negative integer, got {value!r}")
    return value


def _gqa_kind(heads: int, kv_heads: int) -> AttentionKind:
    if kv_heads > heads:
        raise InvalidConfig(
            f"num_key_value_heads ({kv_heads}) exceeds num_attention_heads ({heads})"
        )
    return AttentionKind.MHA if kv_heads == heads else AttentionKind.GQA


def _sliding_layers(cfg: Mapping[str, Any], layers: int) -> tuple[int | None, tuple[int, ...]]:
    """(window, indices of sliding layers) for Qwen2/Qwen3-style configs."""
    layer_types = cfg.get("layer_types")
    window = cfg.get("sliding_window")
    if isinstance(layer_types, list) and len(layer_types) == layers:
        sliding = tuple(i for i, t in enumerate(layer_types) if t == "sliding_attention")
        if sliding and isinstance(window, int) and window > 0:
            return window, sliding
        return None, ()
    if not cfg.get("use_sliding_window", False):
        return None, ()
    if not isinstance(window, int) or window <= 0:
        raise InvalidConfig(f"use_sliding_window is set but sliding_window is {window!r}")
    first = _nonneg_int(cfg, "max_window_layers", layers)
    return window, tuple(range(first, layers))
