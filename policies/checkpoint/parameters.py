"""Where a model's weights live, per decoder layer, grouped by how vLLM shards them.

`model_bytes(spec)` estimates bytes from the config; `ModelBytes.scaled_to(weights)` keeps
that shape but makes the totals match a measured checkpoint. Memory per GPU, pipeline
stages and the decode cost model all read from the same record.

Sharding, as vLLM 0.32 builds the layers:
- split by TP: q/o projections (QKVParallelLinear / RowParallelLinear), MLA q_b/kv_b/o,
  dense MLPs and shared experts (MergedColumnParallelLinear + RowParallelLinear), and the
  vocabulary-parallel embedding and lm_head;
- k/v projections: split per KV head, each rank keeping at least one head (replicated when
  TP > KV heads, QKVParallelLinear's `num_kv_head_replicas`);
- replicated on every TP rank: MLA's q_a/kv_a down-projections (disable_tp), the DSA indexer's
  wq_b/wk, MoE routers (GateLinear), norms;
- routed experts: split over TP x DP ranks, or whole and spread with expert parallel.

Layers are laid out dense-first (first_k_dense_replace), which is exact for the DeepSeek and
GLM families and close enough for interleaved layouts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING

from policies.checkpoint.model_spec import AttentionKind, ModelSpec
from policies.checkpoint.module_groups import ModuleGroup
from policies.units import ceil_div

if TYPE_CHECKING:
    from policies.checkpoint.weights import WeightSize


@dataclass(frozen=True)
class LayerBytes:
    """One decoder layer's weights, in bytes, by sharding."""

    split: int
    """Divided evenly over the TP group."""
    kv_proj: int
    """GQA/MHA k/v projections over all KV heads; each rank holds max(1, kv/tp) heads."""
    replicated: int
    """Whole on every TP rank."""
    experts: int
    """All routed experts of the layer (0 for a dense layer)."""


@dataclass(frozen=True)
class ModelBytes:
    """A model's weight bytes, by layer and sharding."""

    layers: tuple[LayerBytes, ...]
    embedding: int
    """Vocabulary-parallel; held by the first pipeline stage."""
    lm_head: int
    """Vocabulary-parallel; held by the last stage (vLLM builds it even when tied, with PP)."""
    extra: int
    """Outside the language model (vision tower); on the first stage, replicated."""
    final_norm: int
    num_kv_heads: int
    """KV heads the k/v projections are split over (0 for MLA)."""
    num_experts: int
    experts_per_token: int

    @cached_property
    def layer_runs(self) -> tuple[tuple[LayerBytes, range], ...]:
        """Consecutive identical layers, each with the indices it spans. A model has a few
        kinds of layer (dense first, then MoE), so a pipeline stage's sums go over these
        runs rather than layer by layer (`policies.memory.stage_runs`): a large cluster's
        plan sums thousands of stages."""
        runs: list[tuple[LayerBytes, range]] = []
        start = 0
        for index in range(1, len(self.layers) + 1):
            if index == len(self.layers) or self.layers[index] != self.layers[start]:
                runs.append((self.layers[start], range(start, index)))
                start = index
        return tuple(runs)

    @property
    def expert_bytes(self) -> int:
        return sum(layer.experts for layer in self.layers)

    @property
    def total_bytes(self) -> int:
        return self.expert_bytes + self.non_expert_bytes

    @property
    def non_expert_bytes(self) -> int:
        per_layer = sum(layer.split + layer.kv_proj + layer.replicated for layer in self.layers)
        return per_layer + self.embedding + self.lm_head + self.extra + self.final_norm

    def scaled_to(self, weights: WeightSize) -> ModelBytes:
        """Keep the estimated shape, but make expert and non-expert totals match `weights`.

        Each part is rounded up, so the scaled totals are never below the measured ones.
        """

        def scale(value: int, target: int, estimate: int) -> int:
            if estimate == 0:
                return 0
            return ceil_div(value * target, estimate)

        est_expert = self.expert_bytes
        est_other = self.non_expert_bytes
        expert_target = weights.expert_bytes if est_expert else 0
        other_target = weights.total_bytes - expert_target

        def layer(lb: LayerBytes) -> LayerBytes:
            split = scale(lb.split, other_target, est_other)
            kv = scale(lb.kv_proj, other_target, est_other)
            rep = scale(lb.replicated, other_target, est_other)
            return LayerBytes(
                split=split,
                kv_proj=kv,
                replicated=rep,
                experts=scale(lb.experts, expert_target, est_expert),
            )

        return replace(
            self,
            layers=tuple(layer(lb) for lb in self.layers),
            embedding=scale(self.embedding, other_target, est_other),
            lm_head=scale(self.lm_head, other_target, est_other),
            extra=scale(self.extra, other_target, est_other),
            final_norm=scale(self.final_norm, other_target, est_other),
        )


@dataclass(frozen=True)
class ParameterCounts:
    total: int
    experts: int
    active_per_token: int


def parameter_counts(spec: ModelSpec) -> ParameterCounts:
    """Parameter counts (not bytes): total, routed-expert and active per token."""
    shapes = [
        _layer_params(spec, moe_layer=i >= spec.num_dense_layers) for i in range(spec.num_layers)
    ]
    embed = spec.vocab_size * spec.hidden_size
    head = 0 if spec.tie_word_embeddings else embed
    experts = sum(s.experts for s in shapes)
    total = sum(s.total for s in shapes) + embed + head + spec.extra_params + spec.hidden_size
    moe = spec.moe
    active_experts = 0
    if moe is not None:
        active_experts = sum(s.experts for s in shapes) * moe.experts_per_token // moe.num_experts
    active = total - experts - embed + active_experts - spec.extra_params
    return ParameterCounts(total=total, experts=experts, active_per_token=active)


def model_bytes(spec: ModelSpec) -> ModelBytes:
    """Estimate weight bytes from the config and its quantization."""
    quant = spec.quantization
    dtype = spec.dtype_bytes

    def nbytes(params: int, group: ModuleGroup | None) -> int:
        if group is None:
            return params * dtype
        return round(params * quant.bytes_per_param_of(group, dtype))

    layers = []
    for i in range(spec.num_layers):
        p = _layer_params(spec, moe_layer=i >= spec.num_dense_layers)
        mlp_group = ModuleGroup.DENSE_MLP if p.experts == 0 else ModuleGroup.SHARED_EXPERT
        split = nbytes(p.attn_split, ModuleGroup.ATTENTION) + nbytes(p.mlp_split, mlp_group)
        kv = nbytes(p.attn_kv, ModuleGroup.ATTENTION)
        replicated = nbytes(p.attn_replicated, ModuleGroup.ATTENTION) + nbytes(p.unquantized, None)
        layers.append(
            LayerBytes(
                split=split,
                kv_proj=kv,
                replicated=replicated,
                experts=nbytes(p.experts, ModuleGroup.ROUTED_EXPERTS),
            )
        )
    embed = spec.vocab_size * spec.hidden_size * dtype
    moe = spec.moe
    return ModelBytes(
        layers=tuple(layers),
        embedding=embed,
        # vLLM keeps lm_head unquantized for every format handled here.
        lm_head=0 if spec.tie_word_embeddings else embed,
        extra=spec.extra_params * dtype,
        final_norm=spec.hidden_size * dtype,
        num_kv_heads=0 if spec.attention.kind is AttentionKind.MLA else spec.attention.num_kv_heads,
        num_experts=moe.num_experts if moe else 0,
        experts_per_token=moe.experts_per_token if moe else 0,
    )


@dataclass(frozen=True)
class _LayerParams:
    attn_split: int
    attn_kv: int
    attn_replicated: int
    mlp_split: int
    experts: int
    unquantized: int
    """Routers and norms: never quantized, replicated."""

    @property
    def total(self) -> int:
        return (
            self.attn_split
            + self.attn_kv
            + self.attn_replicated
            + self.mlp_split
            + self.experts
            + self.unquantized
        )


def _layer_params(spec: ModelSpec, *, moe_layer: bool) -> _LayerParams:
    h = spec.hidden_size
    att = spec.attention
    norms = 2 * h
    if att.mla is not None:
        mla = att.mla
        qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        if mla.q_lora_rank is not None:
            q_rep = h * mla.q_lora_rank
            q_split = mla.q_lora_rank * att.num_heads * qk
            norms += mla.q_lora_rank
        else:
            q_rep = 0
            q_split = h * att.num_heads * qk
        kv_a = h * mla.latent_dim
        kv_b = mla.kv_lora_rank * att.num_heads * (mla.qk_nope_head_dim + mla.v_head_dim)
        o = att.num_heads * mla.v_head_dim * h
        norms += mla.kv_lora_rank
        indexer = 0
        if att.indexer is not None:
            ix = att.indexer
            q_in = mla.q_lora_rank or h
            indexer = q_in * ix.n_heads * ix.head_dim + h * ix.head_dim + h * ix.n_heads
        attn_split, attn_kv, attn_rep = q_split + kv_b + o, 0, q_rep + kv_a + indexer
    else:
        q = h * att.num_heads * att.head_dim
        kv = 2 * h * att.num_kv_heads * att.head_dim
        o = att.num_heads * att.v_head_dim * h
        bias = (att.num_heads + 2 * att.num_kv_heads) * att.head_dim if att.bias else 0
        attn_split, attn_kv, attn_rep = q + o + bias, kv, 0
    moe = spec.moe
    if moe_layer and moe is not None:
        mlp_split = 3 * h * moe.shared_intermediate_size
        experts = moe.num_experts * 3 * h * moe.expert_intermediate_size
        router = h * moe.num_experts
    else:
        mlp_split = 3 * h * spec.dense_intermediate_size
        experts = 0
        router = 0
    return _LayerParams(
        attn_split=attn_split,
        attn_kv=attn_kv,
        attn_replicated=attn_rep,
        mlp_split=mlp_split,
        experts=experts,
        unquantized=norms + router,
    )
