"""Multimodal wrappers around a supported text model: Kimi-K2.5 and its MoonViT tower.

vLLM loads the wrapper class, which reads the top-level config, while the language model is
described by `text_config`; the policy parses the text model and then adds what the wrapper
changes (its vision parameters, and whether the wrapper class supports pipeline parallel).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from policies.checkpoint.config_fields import first_architecture
from policies.checkpoint.model_spec import ModelSpec
from policies.checkpoint.spec_assembly import PP_ARCHITECTURES
from policies.errors import InvalidConfig


@dataclass(frozen=True)
class Wrapper:
    default_text_architecture: str
    """The text model's class when `text_config` does not name one."""
    extra_params: Callable[[Mapping[str, Any]], int]
    """Parameters outside the text model, estimated from the wrapper's config."""


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


WRAPPERS: Final[Mapping[str, Wrapper]] = {
    "KimiK25ForConditionalGeneration": Wrapper("DeepseekV3ForCausalLM", _kimi_vision_params),
}


def wrapped_text_config(
    cfg: Mapping[str, Any], architecture: str, wrapper: Wrapper
) -> tuple[dict[str, Any], str]:
    """(the text model's config with the wrapper's authoritative fields, its architecture)."""
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
        first_architecture(text, "text_config.architectures")
        if "architectures" in text
        else wrapper.default_text_architecture
    )
    return merged, text_arch


def with_wrapper(spec: ModelSpec, wrapper: str, extra: int) -> ModelSpec:
    """The text model's spec as loaded through `wrapper`, with `extra` parameters besides."""
    return replace(
        spec,
        wrapper_architecture=wrapper,
        extra_params=spec.extra_params + extra,
        supports_pp=spec.supports_pp and wrapper in PP_ARCHITECTURES,
    )
