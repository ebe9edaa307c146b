"""The fields every family shares, read the same way, and the `ModelSpec` they complete.

A family parser works out what differs (attention, MoE layers, dense layers, MTP) and hands
it here; the sizes, dtype, quantization and pipeline-parallel support are read once for all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from policies.checkpoint.config_fields import dtype_bytes, positive_int
from policies.checkpoint.model_spec import AttentionSpec, ModelFamily, ModelSpec, MoeSpec
from policies.checkpoint.module_groups import ModuleGroup
from policies.checkpoint.quantization import parse_quantization

# Model classes that implement SupportsPP in vLLM 0.32 (checked in each model file).
PP_ARCHITECTURES: Final = frozenset(
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


def assemble_spec(
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
    """`names`: the architecture's module names (`policies.checkpoint.module_names`) for
    quantization."""
    bytes_per_element = dtype_bytes(cfg)
    model_type = cfg.get("model_type")
    return ModelSpec(
        architecture=arch,
        model_type=model_type if isinstance(model_type, str) else "",
        wrapper_architecture=None,
        family=family,
        hidden_size=positive_int(cfg, "hidden_size"),
        num_layers=positive_int(cfg, "num_hidden_layers"),
        vocab_size=positive_int(cfg, "vocab_size"),
        max_context=positive_int(cfg, "max_position_embeddings"),
        dense_intermediate_size=dense_intermediate,
        num_dense_layers=num_dense_layers,
        attention=attention,
        moe=moe,
        quantization=parse_quantization(
            cfg.get("quantization_config"), names, bytes_per_element * 8
        ),
        dtype_bytes=bytes_per_element,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        mtp_layers=mtp_layers,
        supports_pp=arch in PP_ARCHITECTURES,
    )
