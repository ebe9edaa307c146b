"""How many bytes of weights a model has, and how many of them are routed experts.

Best source first: the safetensors headers of a local checkpoint (exact, per tensor), then
the `model.safetensors.index.json` total (exact total, expert share estimated), then an
estimate from the config's parameter counts and quantization format. An operator's
override replaces the total and keeps the estimated split.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from policies.checkpoint.model_spec import ModelSpec
from policies.checkpoint.parameters import model_bytes
from policies.errors import InvalidConfig

INDEX_FILENAME: Final = "model.safetensors.index.json"
SINGLE_FILENAME: Final = "model.safetensors"

# Routed experts: "...mlp.experts.3.gate_proj" (DeepSeek, Qwen, GLM), "...block_sparse_moe
# .experts.0.w1" (MiniMax), "...mlp.experts.gate_up_proj_blocks" (gpt-oss, fused). Shared
# experts ("shared_experts.", Qwen2-MoE's "shared_expert.") are not routed.
_EXPERT_TENSOR: Final = re.compile(r"(?<!shared_)experts\.")
_HEADER_LIMIT: Final = 100 * 1024 * 1024


class WeightSource(StrEnum):
    SAFETENSORS_HEADERS = "safetensors_headers"
    """Summed from every tensor's byte range in the local files' headers."""
    SAFETENSORS_INDEX = "safetensors_index"
    """The index's metadata.total_size; the expert share is estimated."""
    ESTIMATE = "estimate"
    """Parameter counts from config.json times bytes per parameter of the format."""
    OVERRIDE = "override"
    """Given by the operator; the expert share is estimated."""


@dataclass(frozen=True)
class WeightSize:
    total_bytes: int
    expert_bytes: int
    """Routed-expert bytes (0 for a dense model)."""
    source: WeightSource

    def __post_init__(self) -> None:
        if self.total_bytes <= 0:
            raise InvalidConfig(f"weight total must be > 0 bytes, got {self.total_bytes}")
        if not 0 <= self.expert_bytes <= self.total_bytes:
            raise InvalidConfig(
                f"expert bytes {self.expert_bytes} must be within 0..{self.total_bytes}"
            )

    @property
    def non_expert_bytes(self) -> int:
        return self.total_bytes - self.expert_bytes


def estimate_weights(spec: ModelSpec) -> WeightSize:
    estimate = model_bytes(spec)
    return WeightSize(
        total_bytes=estimate.total_bytes,
        expert_bytes=estimate.expert_bytes,
        source=WeightSource.ESTIMATE,
    )


def _with_estimated_split(spec: ModelSpec, total: int, source: WeightSource) -> WeightSize:
    estimate = model_bytes(spec)
    expert = estimate.expert_bytes * total // estimate.total_bytes
    return WeightSize(total_bytes=total, expert_bytes=expert, source=source)


def override_weights(spec: ModelSpec, total_bytes: int) -> WeightSize:
    """The operator's total, split into experts and the rest as the estimate splits it."""
    return _with_estimated_split(spec, total_bytes, WeightSource.OVERRIDE)


def weights_from_index(index: Mapping[str, Any], spec: ModelSpec) -> WeightSize:
    """From a parsed `model.safetensors.index.json` (all a hub lookup fetches)."""
    metadata = index.get("metadata")
    total = metadata.get("total_size") if isinstance(metadata, Mapping) else None
    if not isinstance(total, int) or isinstance(total, bool) or total <= 0:
        raise InvalidConfig(f"{INDEX_FILENAME}: metadata.total_size is missing or not positive")
    return _with_estimated_split(spec, total, WeightSource.SAFETENSORS_INDEX)


def weights_from_model_dir(model_dir: Path, spec: ModelSpec) -> WeightSize | None:
    """From a local checkpoint directory; None when it holds no safetensors to measure."""
    index_path = model_dir / INDEX_FILENAME
    if index_path.is_file():
        index = _read_json(index_path)
        weight_map = index.get("weight_map")
        files = sorted(set(weight_map.values())) if isinstance(weight_map, Mapping) else []
        shards = [model_dir / str(f) for f in files]
        if shards and all(p.is_file() for p in shards):
            return _from_headers(shards)
        return weights_from_index(index, spec)
    single = model_dir / SINGLE_FILENAME
    if single.is_file():
        return _from_headers([single])
    shards = sorted(model_dir.glob("*.safetensors"))
    return _from_headers(shards) if shards else None


def is_expert_tensor(name: str) -> bool:
    return _EXPERT_TENSOR.search(name) is not None


def read_safetensors_header(path: Path) -> dict[str, int]:
    """Tensor name -> byte size, from the file's JSON header (the data is not read)."""
    try:
        with path.open("rb") as handle:
            prefix = handle.read(8)
            if len(prefix) != 8:
                raise InvalidConfig(f"{path} is too short to be a safetensors file")
            (length,) = struct.unpack("<Q", prefix)
            if length > _HEADER_LIMIT:
                raise InvalidConfig(f"{path}: header of {length} bytes is implausibly large")
            header = json.loads(handle.read(length))
    except OSError as exc:
        raise InvalidConfig(f"cannot read {path}: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidConfig(f"{path}: safetensors header is not valid JSON") from exc
    if not isinstance(header, dict):
        raise InvalidConfig(f"{path}: safetensors header is not an object")
    sizes: dict[str, int] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2):
            raise InvalidConfig(f"{path}: tensor {name!r} has no data_offsets")
        sizes[name] = int(offsets[1]) - int(offsets[0])
    return sizes


def _from_headers(paths: list[Path]) -> WeightSize:
    total = expert = 0
    for path in paths:
        for name, size in read_safetensors_header(path).items():
            total += size
            if is_expert_tensor(name):
                expert += size
    return WeightSize(
        total_bytes=total, expert_bytes=expert, source=WeightSource.SAFETENSORS_HEADERS
    )


def _read_json(path: Path) -> Mapping[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidConfig(f"cannot read {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise InvalidConfig(f"{path} is not valid JSON: {exc.msg}") from exc
    if not isinstance(raw, Mapping):
        raise InvalidConfig(f"{path} must hold a JSON object")
    return raw
