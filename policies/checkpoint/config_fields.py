"""Typed reads of single `config.json` fields, each refusing a bad value with `InvalidConfig`.

Every family parser reads its fields through these, so a missing or mistyped field gets the
same message whichever family asked for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from policies.errors import InvalidConfig

_DTYPE_BYTES: Final = {
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "float32": 4,
    "float": 4,
}


def positive_int(cfg: Mapping[str, Any], key: str, default: int | None = None) -> int:
    """`cfg[key]` as an integer > 0; `default` stands in for a missing or null field."""
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


def nonnegative_int(cfg: Mapping[str, Any], key: str, default: int) -> int:
    """`cfg[key]` as an integer >= 0; `default` stands in for a missing or null field."""
    value = cfg.get(key, default)
    if value is None:
        value = default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidConfig(f"config field {key} must be a non-negative integer, got {value!r}")
    return value


def first_architecture(cfg: Mapping[str, Any], field: str) -> str:
    """The first class name in `cfg["architectures"]`; `field` names it in the error."""
    archs = cfg.get("architectures")
    if (
        not isinstance(archs, Sequence)
        or isinstance(archs, str)
        or not archs
        or not isinstance(archs[0], str)
    ):
        raise InvalidConfig(f"{field} must be a non-empty list of class names, got {archs!r}")
    return archs[0]


def dtype_bytes(cfg: Mapping[str, Any]) -> int:
    """Bytes per element of the checkpoint dtype (`torch_dtype`, or transformers 5's `dtype`)."""
    raw = cfg.get("torch_dtype", cfg.get("dtype", "bfloat16"))
    name = str(raw).removeprefix("torch.")
    if name not in _DTYPE_BYTES:
        raise InvalidConfig(f"torch_dtype {raw!r} is not one of {sorted(_DTYPE_BYTES)}")
    return _DTYPE_BYTES[name]
