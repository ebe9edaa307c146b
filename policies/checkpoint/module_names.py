"""One representative module name per `ModuleGroup`, per architecture's naming scheme.

A checkpoint's quantization ignore list names modules (or patterns over them); matching it
against these names tells, group by group, what the checkpoint left unquantized.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from policies.checkpoint.module_groups import ModuleGroup

LLAMA_MODULES: Final[Mapping[ModuleGroup, str]] = {
    ModuleGroup.ATTENTION: "model.layers.1.self_attn.q_proj",
    ModuleGroup.DENSE_MLP: "model.layers.1.mlp.gate_proj",
}
QWEN_MOE_MODULES: Final[Mapping[ModuleGroup, str]] = {
    ModuleGroup.ATTENTION: "model.layers.1.self_attn.q_proj",
    ModuleGroup.DENSE_MLP: "model.layers.1.mlp.gate_proj",
    ModuleGroup.ROUTED_EXPERTS: "model.layers.1.mlp.experts.0.gate_proj",
}
MINIMAX_MODULES: Final[Mapping[ModuleGroup, str]] = {
    ModuleGroup.ATTENTION: "model.layers.1.self_attn.q_proj",
    ModuleGroup.SHARED_EXPERT: "model.layers.1.block_sparse_moe.shared_experts.gate_proj",
    ModuleGroup.ROUTED_EXPERTS: "model.layers.1.block_sparse_moe.experts.0.w1",
}
DEEPSEEK_MODULES: Final[Mapping[ModuleGroup, str]] = {
    ModuleGroup.ATTENTION: "model.layers.1.self_attn.q_b_proj",
    ModuleGroup.DENSE_MLP: "model.layers.0.mlp.gate_proj",
    ModuleGroup.SHARED_EXPERT: "model.layers.1.mlp.shared_experts.gate_proj",
    ModuleGroup.ROUTED_EXPERTS: "model.layers.1.mlp.experts.0.gate_proj",
}
"""DeepSeek's scheme, which GLM-4.5 MoE shares."""
GPT_OSS_MODULES: Final[Mapping[ModuleGroup, str]] = {
    ModuleGroup.ATTENTION: "model.layers.1.self_attn.q_proj",
    ModuleGroup.ROUTED_EXPERTS: "model.layers.1.mlp.experts",
}
