"""Llama-style attention (MHA, GQA, MQA) and its sliding-window layers, as configs spell them.

Every GQA family reads the same head fields; only the defaults and the way sliding layers
are listed differ, and those are parameters here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.checkpoint.config_fields import nonnegative_int, positive_int
from policies.checkpoint.model_spec import AttentionKind, AttentionSpec
from policies.errors import InvalidConfig


def gqa_attention(
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
    heads = positive_int(cfg, "num_attention_heads")
    kv_heads = positive_int(cfg, "num_key_value_heads", heads)
    default = head_dim_default or positive_int(cfg, "hidden_size") // heads
    head_dim = positive_int(cfg, "head_dim", default)
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


def sliding_layers(cfg: Mapping[str, Any], layers: int) -> tuple[int | None, tuple[int, ...]]:
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
    first = nonnegative_int(cfg, "max_window_layers", layers)
    return window, tuple(range(first, layers))


def _gqa_kind(heads: int, kv_heads: int) -> AttentionKind:
    if kv_heads > heads:
        raise InvalidConfig(
            f"num_key_value_heads ({kv_heads}) exceeds num_attention_heads ({heads})"
        )
    return AttentionKind.MHA if kv_heads == heads else AttentionKind.GQA
