"""The groups of weights the policy reasons about separately.

They differ in how vLLM shards them (split by TP, replicated, spread over the MoE group)
and in whether a checkpoint quantizes them, so every size is tracked per group.
"""

from __future__ import annotations

from enum import StrEnum


class ModuleGroup(StrEnum):
    ATTENTION = "attention"
    """Attention projections (q/k/v/o, or MLA's q_a/q_b/kv_a/kv_b/o)."""
    DENSE_MLP = "dense_mlp"
    """The MLP of dense layers (all layers of a dense model, first-k layers of a MoE)."""
    SHARED_EXPERT = "shared_expert"
    """Shared experts of a MoE layer; vLLM builds them as a dense MLP split by TP."""
    ROUTED_EXPERTS = "routed_experts"
    """Routed experts; split over TP x DP ranks, or whole and spread with expert parallel."""
