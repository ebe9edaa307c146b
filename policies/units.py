"""Byte units. Memory and disk figures are binary (GiB), as vLLM and nvidia-smi report them."""

from __future__ import annotations

from typing import Final

MIB: Final = 1024**2
GIB: Final = 1024**3


def gib(n_bytes: float) -> float:
    """Bytes as GiB, for messages and JSON."""
    return n_bytes / GIB


def ceil_div(numerator: int, denominator: int) -> int:
    """Integer ceiling division; shares are rounded up so per-GPU sums never undercount."""
    return -(-numerator // denominator)
