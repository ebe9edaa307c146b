"""The parser for the MLA families: DeepSeek-V2/V3/V3.2, Kimi-K2.x's text model, GLM-5.

They share DeepSeek's config fields and vLLM's deepseek_v2.py model; MLA's latent sizes and
the sparse-attention indexer are read here because no other family has them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.checkpoint.config_fields import nonnegative_int, positive_int
from policies.checkpoint.model_spec import (
    AttentionKind,
    AttentionSpec,
    MlaDims,
    ModelFamily,
    ModelSpec,
    MoeSpec,
    SparseIndexerDims,
)
from policies.checkpoint.module_names import DEEPSEEK_MODULES
from policies.checkpoint.spec_assembly import assemble_spec
from policies.errors import InvalidConfig


def parse_deepseek_mla(cfg: Mapping[str, Any], arch: str) -> ModelSpec:
    """DeepSeek-V2/V3/V3.2, Kimi-K2.x text model, GLM-5: MLA + MoE (+ DSA indexer).

    transformers DeepseekV3Config / GlmMoeDsaConfig: `q_lora_rank` (None allowed),
    `kv_lora_rank`, `qk_nope_head_dim`, `qk_rope_head_dim`, `v_head_dim`, `n_routed_experts`,
    `n_shared_experts`, `moe_intermediate_size`, `first_k_dense_replace`, `intermediate_size`
    (dense layers), `num_nextn_predict_layers` (MTP); GLM-5 adds `index_topk`,
    `index_head_dim`, `index_n_heads`. DeepSeek's remote code also uses `moe_layer_freq`.
    vLLM deepseek_v2.py: DeepseekV2MLAAttention keeps fused_qkv_a_proj / kv_a_proj_with_mqa
    replicated (disable_tp) and splits q_b_proj, kv_b_proj (ColumnParallel) and o_proj
    (RowParallel) by TP; shared experts are a DeepseekV2MLP of
    moe_intermediate_size * n_shared_experts split by TP; the Indexer's wq_b and wk are
    replicated.
    """
    heads = positive_int(cfg, "num_attention_heads")
    layers = positive_int(cfg, "num_hidden_layers")
    attention = _mla_attention(cfg, arch, heads)
    first_dense = nonnegative_int(cfg, "first_k_dense_replace", 0)
    freq = positive_int(cfg, "moe_layer_freq", 1)
    n_experts = nonnegative_int(cfg, "n_routed_experts", 0)
    mlp_types = cfg.get("mlp_layer_types")
    if isinstance(mlp_types, list) and len(mlp_types) == layers:
        n_moe = sum(1 for t in mlp_types if t == "sparse")
    else:
        n_moe = sum(1 for i in range(layers) if i >= first_dense and i % freq == 0)
    if n_experts == 0:
        n_moe = 0
    moe = None
    if n_moe:
        shared = nonnegative_int(cfg, "n_shared_experts", 0)
        expert_inter = positive_int(cfg, "moe_intermediate_size")
        moe = MoeSpec(
            num_experts=n_experts,
            experts_per_token=positive_int(cfg, "num_experts_per_tok"),
            expert_intermediate_size=expert_inter,
            shared_intermediate_size=shared * expert_inter,
            num_moe_layers=n_moe,
        )
    n_dense = layers - n_moe
    return assemble_spec(
        cfg,
        arch,
        family=ModelFamily.MOE if moe else ModelFamily.DENSE,
        attention=attention,
        moe=moe,
        dense_intermediate=positive_int(cfg, "intermediate_size") if n_dense else 0,
        num_dense_layers=n_dense,
        mtp_layers=nonnegative_int(cfg, "num_nextn_predict_layers", 0),
        names=DEEPSEEK_MODULES,
    )


def _mla_attention(cfg: Mapping[str, Any], arch: str, heads: int) -> AttentionSpec:
    """MLA's latent sizes, and the DSA indexer where the architecture has one."""
    q_lora = cfg.get("q_lora_rank")
    if q_lora is not None and (not isinstance(q_lora, int) or q_lora <= 0):
        raise InvalidConfig(f"q_lora_rank must be a positive integer or null, got {q_lora!r}")
    mla = MlaDims(
        q_lora_rank=q_lora,
        kv_lora_rank=positive_int(cfg, "kv_lora_rank"),
        qk_nope_head_dim=positive_int(cfg, "qk_nope_head_dim"),
        qk_rope_head_dim=positive_int(cfg, "qk_rope_head_dim"),
        v_head_dim=positive_int(cfg, "v_head_dim"),
    )
    indexer = None
    if "index_topk" in cfg or arch in ("GlmMoeDsaForCausalLM", "DeepseekV32ForCausalLM"):
        indexer = SparseIndexerDims(
            n_heads=positive_int(cfg, "index_n_heads", 64),
            head_dim=positive_int(cfg, "index_head_dim", 128),
            top_k=positive_int(cfg, "index_topk", 2048),
        )
    return AttentionSpec(
        kind=AttentionKind.MLA,
        num_heads=heads,
        num_kv_heads=positive_int(cfg, "num_key_value_heads", heads),
        head_dim=mla.qk_nope_head_dim + mla.qk_rope_head_dim,
        v_head_dim=mla.v_head_dim,
        mla=mla,
        indexer=indexer,
    )
