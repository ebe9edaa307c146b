"""A decode cost model: the single-stream tokens/s ceiling of a layout.

One decode step of one sequence is memory-bound. Per pipeline stage, a GPU of that stage
reads its share of the weights a token touches and that stage's KV cache for the context,
at the GPU's memory bandwidth; then the TP group all-reduces twice per layer (after
attention and after the MLP), a third time where the model normalizes q and k across
all heads (MiniMax-M2: each token's variance, `tp_norm_reduce_s`), and a MoE layer spread
over DP ranks exchanges tokens twice (dispatch and combine). Stages run one after another
for a single sequence, with one hand-off between consecutive stages.

    time/token = sum over stages of (bytes read / HBM bandwidth + collectives)
                 + (pp - 1) x hand-off
    collective over n ranks of b bytes (ring) = 2 (n - 1) x step latency
                                                + 2 (n - 1) / n x b / link bandwidth

Step latency and link bandwidth come from the GPU profile (PCIe-only boxes pay ~4 us per
step; NVLink ~0.5 us); hops between nodes use `NETWORK_*` below. This is a ceiling: kernel
launch gaps, attention kernel efficiency and scheduling are ignored (the story's field figures,
61 tok/s for Kimi-K2.5 at TP8 and 84 tok/s for MiniMax-M2.5 at TP4+EP, sit at about 60% of it).
Its job is ranking: on PCIe it shows why high-TP MLA layouts (two all-reduces per layer over
60 layers) lose to fewer TP ranks with pipeline stages.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import comb

from policies.checkpoint.model_spec import ModelSpec
from policies.checkpoint.parameters import ModelBytes
from policies.inventory import GpuProfile
from policies.layout import Layout
from policies.memory import (
    KvCacheDtype,
    kv_bytes_per_token_per_layer,
    pipeline_stages,
    stage_runs,
)
from policies.units import ceil_div

CEILING_CONTEXT_TOKENS = 1024
"""Context length at which the single-stream ceiling is quoted."""
NETWORK_LATENCY_US = 10.0
"""One step of a collective or a stage hand-off between nodes (RDMA-class network)."""
NETWORK_BANDWIDTH_GBPS = 25.0
"""Per-direction bandwidth between nodes (200 Gb/s)."""
_ACTIVATION_BYTES = 2


@dataclass(frozen=True)
class DecodeCost:
    weights_s: float
    kv_s: float
    collectives_s: float
    handoff_s: float

    @property
    def seconds_per_token(self) -> float:
        return self.weights_s + self.kv_s + self.collectives_s + self.handoff_s

    @property
    def tokens_per_second(self) -> float:
        return 1.0 / self.seconds_per_token


def decode_cost(
    spec: ModelSpec,
    model: ModelBytes,
    layout: Layout,
    gpu: GpuProfile,
    *,
    kv_cache_dtype: KvCacheDtype,
    gpus_per_node: int,
    context_tokens: int = CEILING_CONTEXT_TOKENS,
) -> DecodeCost:
    """The cost of one decode token of one sequence (see the module docstring)."""
    bandwidth = gpu.hbm_bandwidth_gbps * 1e9
    tp = layout.tp
    stages = pipeline_stages(spec.num_layers, layout.pp)
    kv_per_layer = kv_bytes_per_token_per_layer(spec, tp, kv_cache_dtype)
    hidden_bytes = spec.hidden_size * _ACTIVATION_BYTES
    tp_step, tp_link = link_for(gpu, crosses_nodes=tp > gpus_per_node)
    moe_crosses = layout.moe_group_size > gpus_per_node
    moe_step, moe_link = link_for(gpu, crosses_nodes=moe_crosses)
    tp_reduce = 2 * collective_s(tp, hidden_bytes, tp_step, tp_link) if tp > 1 else 0.0
    tp_reduce += tp_norm_reduce_s(spec, 1, tp, tp_step, tp_link)
    # DCP merges each layer's partial attention across its ranks (all-gather of the queries,
    # reduce-scatter of outputs and log-sum-exp: vLLM's "ag_rs" backend).
    dcp_exchange = collective_s(layout.dcp, hidden_bytes, tp_step, tp_link)
    moe_exchange = 0.0
    if layout.dp > 1:
        group = layout.moe_group_size
        moe_exchange = 2 * collective_s(group, hidden_bytes * layout.dp, moe_step, moe_link)
    # Most layers are identical: each run of identical layers has one read and one set of
    # collectives. Bytes are whole, so a stage's read is a product per run; the collectives
    # (stages run one after another: one sum over all layers) are still added layer by
    # layer, in order, to keep the same floating-point sum.
    reads: list[int] = []
    collectives_s = 0.0
    for lb, span in model.layer_runs:
        layer_read = ceil_div(lb.split, tp) + lb.replicated
        if model.num_kv_heads:
            heads = max(1, ceil_div(model.num_kv_heads, tp))
            layer_read += ceil_div(lb.kv_proj * heads, model.num_kv_heads)
        layer_read += _active_expert_bytes(model, lb.experts, layout)
        reads.append(layer_read)
        layer_collectives = tp_reduce + dcp_exchange + (moe_exchange if lb.experts else 0.0)
        for _ in span:
            collectives_s += layer_collectives
    weights_s = kv_s = 0.0
    for index, (layers, runs) in enumerate(zip(stages, stage_runs(model, layout.pp), strict=True)):
        read = sum(reads[run] * count for run, count in runs)
        if index == len(stages) - 1:
            read += ceil_div(model.lm_head, tp)
        weights_s += read / bandwidth
        kv_s += kv_per_layer * len(layers) * context_tokens / layout.dcp / bandwidth
    crosses = layout.gpus_per_replica > gpus_per_node
    handoff_step, handoff_link = link_for(gpu, crosses_nodes=crosses)
    handoff_s = (layout.pp - 1) * (handoff_step + hidden_bytes / handoff_link)
    return DecodeCost(
        weights_s=weights_s, kv_s=kv_s, collectives_s=collectives_s, handoff_s=handoff_s
    )


def _active_expert_bytes(model: ModelBytes, experts: int, layout: Layout) -> int:
    """Bytes of the top-k experts the busiest rank reads for one token.

    Without EP every rank holds a 1/group slice of every expert, so each reads its slice of
    the k routed ones. With EP a rank holds whole experts, and the layer's combine waits for
    the rank the router sent the most of the token's k experts to: not k / group, but the
    expected maximum of the k distinct experts' counts over the ranks
    (`expected_busiest_rank_experts`), 3.5 rather than 2 for 8 of 256 experts on 4 ranks."""
    if experts == 0 or model.num_experts == 0:
        return 0
    per_expert = ceil_div(experts, model.num_experts)
    k = model.experts_per_token
    group = layout.moe_group_size
    if layout.ep and group > 1:
        busiest = expected_busiest_rank_experts(model.num_experts, k, group)
        return round(busiest * per_expert)
    return ceil_div(k * per_expert, group)


@lru_cache(maxsize=4096)
def expected_busiest_rank_experts(num_experts: int, k: int, ranks: int) -> float:
    """E[max over ranks of the routed experts a rank holds] when a token picks k distinct
    experts uniformly among `num_experts` spread over `ranks` ranks as evenly as they go
    (vLLM gives the first num_experts % ranks ranks one more): the sum over m >= 1 of
    P(max >= m), with P(max < m) counted exactly as the ways to pick k experts with fewer
    than m on every rank over C(num_experts, k). Routers are trained towards balance, so
    uniform is the optimistic case a ceiling wants.

    The ways are the coefficient of x^k in the product of one polynomial per rank, and the
    ranks hold one of two sizes: each size's polynomial is raised to its count by squaring,
    so the cost grows with log(ranks), not ranks (a plan over 512 nodes asks for EP
    groups of thousands). Cached: a plan asks the same few triples for every candidate."""
    k = min(k, num_experts)
    if k <= 0:
        return 0.0
    if ranks <= 1:
        return float(k)
    base, extra = divmod(num_experts, ranks)
    total = comb(num_experts, k)
    expected = 0.0
    for m in range(1, k + 1):
        # Picks of j experts on one rank of `size` experts, fewer than m of them: C(size, j).
        ways = _power(_rank_ways(base + 1, m, k), extra, k)
        ways = _times(ways, _power(_rank_ways(base, m, k), ranks - extra, k), k)
        expected += 1.0 - ways[k] / total
    return expected


def _rank_ways(size: int, m: int, k: int) -> list[int]:
    return [comb(size, c) if c < m else 0 for c in range(k + 1)]


def _times(a: list[int], b: list[int], k: int) -> list[int]:
    """The product of two polynomials, cut after x^k."""
    return [sum(a[i] * b[j - i] for i in range(j + 1)) for j in range(k + 1)]


def _power(poly: list[int], n: int, k: int) -> list[int]:
    """`poly` to the n-th power, cut after x^k (by squaring)."""
    result = [1] + [0] * k
    while n:
        if n & 1:
            result = _times(result, poly, k)
        poly = _times(poly, poly, k)
        n >>= 1
    return result


_VARIANCE_BYTES = 2 * 4
"""Per token: q's and k's variances in fp32, reduced together."""


def tp_norm_reduce_s(
    spec: ModelSpec, tokens: float, tp: int, step_s: float, link_bps: float
) -> float:
    """The per-layer all-reduce of a q/k norm that spans the heads TP splits: a latency-bound
    collective of a few bytes per token (see `AttentionSpec.tp_qk_norm_all_reduce`)."""
    if tp <= 1 or not spec.attention.tp_qk_norm_all_reduce:
        return 0.0
    return collective_s(tp, int(tokens * _VARIANCE_BYTES), step_s, link_bps)


def link_for(gpu: GpuProfile, *, crosses_nodes: bool) -> tuple[float, float]:
    """(step latency in s, bandwidth in bytes/s)."""
    if crosses_nodes:
        return NETWORK_LATENCY_US * 1e-6, NETWORK_BANDWIDTH_GBPS * 1e9
    return gpu.link_latency_us * 1e-6, gpu.link_bandwidth_gbps * 1e9


def collective_s(ranks: int, payload_bytes: int, step_s: float, link_bps: float) -> float:
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) * step_s + 2 * (ranks - 1) / ranks * payload_bytes / link_bps
