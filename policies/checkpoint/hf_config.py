"""A Hugging Face `config.json`, parsed once into a typed, normalised `ModelSpec`.

Field names come from the installed `transformers` config classes
(`transformers/models/<type>/configuration_<type>.py`, transformers 5.x) and from how vLLM's
model classes read them (`vllm/model_executor/models/<file>.py`, vLLM 0.32); each family
parser cites its sources. An architecture not in `SUPPORTED_ARCHITECTURES` is refused with
`UnsupportedModel`: the rules differ per family, and a silent guess would admit a model that
vLLM then refuses after a long download.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from policies.checkpoint.config_fields import first_architecture
from policies.checkpoint.gqa_families import (
    parse_glm4_moe,
    parse_gpt_oss,
    parse_llama_like,
    parse_minimax_m2,
    parse_qwen3_moe,
)
from policies.checkpoint.mla_families import parse_deepseek_mla
from policies.checkpoint.model_spec import ModelSpec
from policies.checkpoint.multimodal_wrappers import WRAPPERS, with_wrapper, wrapped_text_config
from policies.errors import InvalidConfig, UnsupportedModel

Parser = Callable[[Mapping[str, Any], str], ModelSpec]

_PARSERS: Final[Mapping[str, Parser]] = {
    "LlamaForCausalLM": parse_llama_like,
    "Qwen2ForCausalLM": parse_llama_like,
    "Qwen3ForCausalLM": parse_llama_like,
    "Qwen3MoeForCausalLM": parse_qwen3_moe,
    "MiniMaxM2ForCausalLM": parse_minimax_m2,
    "DeepseekV2ForCausalLM": parse_deepseek_mla,
    "DeepseekV3ForCausalLM": parse_deepseek_mla,
    "DeepseekV32ForCausalLM": parse_deepseek_mla,
    "GlmMoeDsaForCausalLM": parse_deepseek_mla,
    "Glm4MoeForCausalLM": parse_glm4_moe,
    "GptOssForCausalLM": parse_gpt_oss,
}

SUPPORTED_ARCHITECTURES: Final[tuple[str, ...]] = tuple(sorted({*_PARSERS, *WRAPPERS}))


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
    architecture = first_architecture(cfg, "architectures")
    wrapper = WRAPPERS.get(architecture)
    if wrapper is not None:
        text_cfg, text_arch = wrapped_text_config(cfg, architecture, wrapper)
        if text_arch not in _PARSERS:
            raise UnsupportedModel(
                f"{architecture} wraps text architecture {text_arch!r}, which is not supported"
            )
        spec = _PARSERS[text_arch](text_cfg, text_arch)
        return with_wrapper(spec, architecture, wrapper.extra_params(cfg))
    if architecture in _PARSERS:
        return _PARSERS[architecture](cfg, architecture)
    hint = " (it wraps a text_config)" if isinstance(cfg.get("text_config"), Mapping) else ""
    raise UnsupportedModel(
        f"architecture {architecture!r}{hint} is not supported; supported: "
        + ", ".join(SUPPORTED_ARCHITECTURES)
    )
