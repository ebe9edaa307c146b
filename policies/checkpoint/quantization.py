"""Parse a config's `quantization_config` into a typed record, once, at the edge.

Formats follow the `quant_method` values vLLM dispatches on
(`vllm/model_executor/layers/quantization/__init__.py`): `fp8` (Hugging Face fine-grained FP8,
block-wise when `weight_block_size` is set), `compressed-tensors`, `mxfp4`, `modelopt` /
`modelopt_fp4`, `awq`, `gptq`. Anything else is rejected rather than guessed.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from policies.checkpoint.module_groups import ModuleGroup
from policies.errors import InvalidConfig, UnsupportedModel


class QuantFormat(StrEnum):
    NONE = "none"
    """Unquantized: weights in the checkpoint dtype (bf16/fp16/fp32)."""
    FP8 = "fp8"
    """FP8 with per-tensor or per-channel scales: no alignment rule under TP."""
    FP8_BLOCK = "fp8_block"
    """FP8 with one scale per (block_n x block_k) tile: every TP-split dimension must align."""
    INT8 = "int8"
    INT4 = "int4"
    """Integer 4-bit, usually grouped (compressed-tensors pack-quantized, AWQ, GPTQ)."""
    MXFP4 = "mxfp4"
    """OCP microscaling FP4: e2m1 values, one e8m0 scale per 32."""
    NVFP4 = "nvfp4"
    """NVIDIA FP4: e2m1 values, one fp8 scale per 16 (plus a global scale)."""


@dataclass(frozen=True)
class QuantSpec:
    """How the checkpoint's linear layers are stored."""

    format: QuantFormat
    method: str
    """`quant_method` as written in the config, or "none"."""
    weight_bits: int
    group_size: int | None = None
    block_size: tuple[int, int] | None = None
    """(block_n, block_k) for block-wise FP8, in vLLM's order (output dim, input dim)."""
    unquantized_patterns: tuple[str, ...] = ()
    """The config's ignore list, verbatim (`ignore`, `modules_to_not_convert`, ...)."""
    quantized_groups: frozenset[ModuleGroup] = frozenset()
    """Which module groups the checkpoint quantizes, after applying the ignore list."""

    @property
    def is_block_fp8(self) -> bool:
        return self.format is QuantFormat.FP8_BLOCK

    def bytes_per_param(self, unquantized_bytes: int) -> float:
        """Average bytes per parameter of a quantized module, scales included."""
        if self.format is QuantFormat.NONE:
            return float(unquantized_bytes)
        if self.format is QuantFormat.FP8_BLOCK and self.block_size is not None:
            # One fp32 scale per block.
            return 1.0 + 4.0 / (self.block_size[0] * self.block_size[1])
        if self.format in (QuantFormat.FP8, QuantFormat.INT8):
            return 1.0
        if self.format is QuantFormat.MXFP4:
            return 0.5 + 1.0 / 32
        if self.format is QuantFormat.NVFP4:
            return 0.5 + 1.0 / (self.group_size or 16)
        # INT4: packed nibbles plus one bf16 scale per group (symmetric, no zero point).
        group = self.group_size or 128
        return self.weight_bits / 8 + 2.0 / group

    def bytes_per_param_of(self, group: ModuleGroup, unquantized_bytes: int) -> float:
        if group in self.quantized_groups:
            return self.bytes_per_param(unquantized_bytes)
        return float(unquantized_bytes)


def module_matches(name: str, pattern: str) -> bool:
    """Whether an ignore-list entry covers a module.

    `re:` entries are regexes matched from the start (compressed-tensors' convention); other
    entries match whole dotted components or globs, so "gate" (MiniMax's router) does not
    catch "gate_proj".
    """
    if pattern.startswith("re:"):
        return re.match(pattern[3:], name) is not None
    if "*" in pattern or "?" in pattern:
        return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name, pattern + ".*")
    return (
        name == pattern
        or name.startswith(pattern + ".")
        or name.endswith("." + pattern)
        or f".{pattern}." in name
    )


def parse_quantization(
    raw: Any, module_names: Mapping[ModuleGroup, str], unquantized_bits: int
) -> QuantSpec:
    """Parse `quantization_config` (None for an unquantized checkpoint).

    `module_names` gives one representative module name per group for this architecture,
    so the ignore list can be applied per group.
    """
    if raw is None:
        return QuantSpec(format=QuantFormat.NONE, method="none", weight_bits=unquantized_bits)
    if not isinstance(raw, Mapping):
        raise InvalidConfig(f"quantization_config must be an object, got {type(raw).__name__}")
    method = raw.get("quant_method")
    if not isinstance(method, str):
        raise InvalidConfig("quantization_config.quant_method is missing or not a string")
    method_key = method.lower()
    if method_key == "fp8":
        spec = _parse_hf_fp8(raw)
    elif method_key == "compressed-tensors":
        spec = _parse_compressed_tensors(raw)
    elif method_key == "mxfp4":
        spec = QuantSpec(
            format=QuantFormat.MXFP4,
            method=method,
            weight_bits=4,
            group_size=32,
            unquantized_patterns=_patterns(raw, "modules_to_not_convert"),
        )
    elif method_key in ("modelopt", "modelopt_fp4"):
        spec = _parse_modelopt(raw, method)
    elif method_key in ("awq", "gptq"):
        bits = _int_field(raw, "bits", 4)
        group = raw.get("group_size", raw.get("q_group_size", 128))
        spec = QuantSpec(
            format=QuantFormat.INT4 if bits == 4 else QuantFormat.INT8,
            method=method,
            weight_bits=bits,
            group_size=group if isinstance(group, int) and group > 0 else None,
            unquantized_patterns=_patterns(raw, "modules_to_not_convert"),
        )
    else:
        raise UnsupportedModel(
            f"quantization_config.quant_method {method!r} is not supported; supported: "
            "fp8, compressed-tensors, mxfp4, modelopt, modelopt_fp4, awq, gptq"
        )
    quantized = frozenset(
        group
        for group, name in module_names.items()
        if not any(module_matches(name, p) for p in spec.unquantized_patterns)
    )
    return QuantSpec(
        format=spec.format,
        method=spec.method,
        weight_bits=spec.weight_bits,
        group_size=spec.group_size,
        block_size=spec.block_size,
        unquantized_patterns=spec.unquantized_patterns,
        quantized_groups=quantized,
    )


def _parse_hf_fp8(raw: Mapping[str, Any]) -> QuantSpec:
    ignore = _patterns(raw, "modules_to_not_convert") + _patterns(raw, "ignored_layers")
    block = raw.get("weight_block_size")
    if block is None:
        return QuantSpec(
            format=QuantFormat.FP8, method="fp8", weight_bits=8, unquantized_patterns=ignore
        )
    return QuantSpec(
        format=QuantFormat.FP8_BLOCK,
        method="fp8",
        weight_bits=8,
        block_size=_block(block, "quantization_config.weight_block_size"),
        unquantized_patterns=ignore,
    )


def _parse_compressed_tensors(raw: Mapping[str, Any]) -> QuantSpec:
    groups = raw.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        raise InvalidConfig("quantization_config.config_groups is missing or empty")
    schemes = []
    for name, group in groups.items():
        weights = group.get("weights") if isinstance(group, Mapping) else None
        if not isinstance(weights, Mapping):
            raise InvalidConfig(f"quantization_config.config_groups.{name}.weights is missing")
        schemes.append(
            (
                weights.get("type"),
                weights.get("num_bits"),
                weights.get("strategy"),
                weights.get("group_size"),
                tuple(weights.get("block_structure") or ()),
            )
        )
    if len(set(schemes)) > 1:
        raise UnsupportedModel(
            "compressed-tensors checkpoints with several weight schemes are not supported: "
            f"{sorted(map(str, set(schemes)))}"
        )
    kind, bits, strategy, group_size, block = schemes[0]
    ignore = _patterns(raw, "ignore")
    if not isinstance(bits, int) or isinstance(bits, bool):
        raise InvalidConfig(f"compressed-tensors weights.num_bits must be an integer, got {bits!r}")
    group = group_size if isinstance(group_size, int) and group_size > 0 else None
    if kind == "int" and bits in (4, 8):
        return QuantSpec(
            format=QuantFormat.INT4 if bits == 4 else QuantFormat.INT8,
            method="compressed-tensors",
            weight_bits=bits,
            group_size=group,
            unquantized_patterns=ignore,
        )
    if kind == "float" and bits == 8:
        if strategy == "block":
            return QuantSpec(
                format=QuantFormat.FP8_BLOCK,
                method="compressed-tensors",
                weight_bits=8,
                block_size=_block(list(block), "compressed-tensors weights.block_structure"),
                unquantized_patterns=ignore,
            )
        return QuantSpec(
            format=QuantFormat.FP8,
            method="compressed-tensors",
            weight_bits=8,
            unquantized_patterns=ignore,
        )
    if kind == "float" and bits == 4:
        return QuantSpec(
            format=QuantFormat.NVFP4,
            method="compressed-tensors",
            weight_bits=4,
            group_size=group or 16,
            unquantized_patterns=ignore,
        )
    raise UnsupportedModel(
        f"compressed-tensors weights of type {kind!r} with {bits} bits are not supported"
    )


def _parse_modelopt(raw: Mapping[str, Any], method: str) -> QuantSpec:
    # modelopt configs nest the algorithm under "quantization" in older exports.
    inner = raw.get("quantization")
    source = inner if isinstance(inner, Mapping) else raw
    algo = str(source.get("quant_algo", "")).upper()
    ignore = _patterns(source, "exclude_modules") + _patterns(raw, "exclude_modules")
    if algo == "NVFP4" or method == "modelopt_fp4":
        group = source.get("group_size", 16)
        return QuantSpec(
            format=QuantFormat.NVFP4,
            method=method,
            weight_bits=4,
            group_size=group if isinstance(group, int) and group > 0 else 16,
            unquantized_patterns=ignore,
        )
    if algo == "FP8":
        return QuantSpec(
            format=QuantFormat.FP8, method=method, weight_bits=8, unquantized_patterns=ignore
        )
    raise UnsupportedModel(f"modelopt quant_algo {algo or None!r} is not supported")


def _patterns(raw: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = raw.get(key)
    if value is None:
        return ()
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise InvalidConfig(f"quantization_config.{key} must be a list of strings")
    return tuple(str(v) for v in value)


def _block(value: Any, field: str) -> tuple[int, int]:
    if (
        isinstance(value, Sequence)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    ):
        return (int(value[0]), int(value[1]))
    raise InvalidConfig(f"{field} must be two positive integers, got {value!r}")


def _int_field(raw: Mapping[str, Any], key: str, default: int) -> int:
    value = raw.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise InvalidConfig(f"quantization_config.{key} must be a positive integer, got {value!r}")
    return value
