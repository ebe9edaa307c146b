"""Memory on one GPU: weights, KV cache per token, what is left for the KV cache.

vLLM budgets `memory x gpu_memory_utilization` per GPU. From that it subtracts the weights,
the memory its profiling run leaves allocated or peaks at, and its CUDA-graph estimate; the
rest becomes the KV cache (every term is in `policies.engine_memory`). It logs the result as
"Available KV cache memory", "GPU KV cache size: N tokens" and "Maximum concurrency for L
tokens per request: C x", and refuses to start when one request of `max_model_len` tokens does
not fit. With pipeline parallelism each stage holds only its layers, and the engine uses the
smallest stage's token count. Decode context parallel shards each TP group's KV cache by
token over `dcp` ranks, so a GPU stores 1/dcp of the tokens.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache
from typing import NamedTuple

from policies.checkpoint.model_spec import ModelSpec
from policies.checkpoint.parameters import ModelBytes
from policies.engine_memory import EngineSettings, MemoryTerm, StageTerms
from policies.inventory import GpuProfile, Interconnect
from policies.layout import Layout
from policies.units import ceil_div

KV_BLOCK_TOKENS = 16
"""vLLM allocates the KV cache in blocks of this many tokens (the default block size)."""
_CPU_BLOCK_TOKENS = 128
"""vLLM's CPU platform default (vllm/platforms/cpu.py), except for MLA, whose CPU decode
kernel takes 16 only."""


def kv_block_tokens(spec: ModelSpec, gpu: GpuProfile) -> int:
    """The block size vLLM gives the cache on `gpu`: the KV cache size it logs is a
    multiple of it."""
    if gpu.interconnect is Interconnect.HOST_MEMORY and (
        spec.attention.mla is None or gpu.cpu_amx_tiles
    ):
        return _CPU_BLOCK_TOKENS
    return KV_BLOCK_TOKENS


# DeepSeek Sparse Attention: vLLM stores the indexer key as 128 fp8 values plus one fp32
# scale per 128 (deepseek_v2.py Indexer: head_dim + head_dim // 128 * 4, uint8).
_INDEXER_SCALE_BLOCK = 128
# fp8_ds_mla packs 512 fp8 latent values, 16 bytes of scales and the 64-dim RoPE key in bf16
# (vllm/v1/hisparse/runtime.py); vLLM uses it for sparse MLA whenever the cache is quantized
# (and on SM120 even at "auto").
_FP8_DS_MLA_BYTES = 656


class KvCacheDtype(StrEnum):
    AUTO = "auto"
    """The model's activation dtype (bf16 for every supported checkpoint)."""
    FP8 = "fp8"


@lru_cache(maxsize=1024)
def pipeline_stages(num_layers: int, pp: int) -> tuple[range, ...]:
    """Layer ranges per stage, as vllm/distributed/utils.py get_pp_indices splits them:
    layers // pp each, the remainder added to the stages just before the last. Cached: a
    plan asks for the same few splits for every candidate layout (the tuple is immutable)."""
    per = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        per[-i] += 1
    ranges = []
    start = 0
    for count in per:
        ranges.append(range(start, start + count))
        start += count
    return tuple(ranges)


def stage_runs(model: ModelBytes, pp: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Per pipeline stage, its layers as (index into `model.layer_runs`, how many of that
    run's layers the stage holds), in layer order."""
    return _stage_runs(tuple(span for _, span in model.layer_runs), pp)


@lru_cache(maxsize=1024)
def _stage_runs(spans: tuple[range, ...], pp: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    # Cached on the runs' spans: every candidate of a plan with the same PP splits the
    # model's layers the same way.
    num_layers = spans[-1].stop if spans else 0
    return tuple(_runs_in(spans, layers) for layers in pipeline_stages(num_layers, pp))


def weights_per_gpu_by_stage(model: ModelBytes, layout: Layout) -> tuple[int, ...]:
    """Bytes of weights one GPU of each pipeline stage holds."""
    stages = stage_runs(model, layout.pp)
    shares = _run_shares(model, layout)
    return tuple(
        _stage_weights(
            model, shares, runs, layout.tp, first=index == 0, last=index == len(stages) - 1
        )
        for index, runs in enumerate(stages)
    )


def _run_shares(model: ModelBytes, layout: Layout) -> list[int]:
    """Bytes one GPU holds of one layer of each run of identical layers."""
    tp = layout.tp
    return [
        ceil_div(lb.split, tp)
        + kv_proj_share(model, lb.kv_proj, tp)
        + lb.replicated
        + expert_share(model, lb.experts, layout)
        for lb, _ in model.layer_runs
    ]


def _stage_weights(
    model: ModelBytes,
    shares: list[int],
    runs: tuple[tuple[int, int], ...],
    tp: int,
    *,
    first: bool,
    last: bool,
) -> int:
    # Whole bytes: a run's share times its layers in the stage is their sum.
    total = sum(shares[run] * count for run, count in runs)
    if first:
        total += ceil_div(model.embedding, tp) + model.extra
    if last:
        total += ceil_div(model.lm_head, tp) + model.final_norm
    return total


@dataclass(frozen=True)
class StageShape:
    """A pipeline stage as its memory sees it, whatever the layout: its runs of identical
    layers, whether it is the first or last, and its MoE, full and sliding-window layers."""

    layers: range
    """The first stage of this shape."""
    runs: tuple[tuple[int, int], ...]
    first: bool
    last: bool
    moe_layers: int
    full_layers: int
    sliding_layers: int


def stage_shapes(spec: ModelSpec, model: ModelBytes, pp: int) -> tuple[StageShape, ...]:
    """The distinct stages of a PP split, in the order they first occur: a deep pipeline
    repeats the same stage many times, and its memory is worked out once per distinct
    stage."""
    att = spec.attention
    first_moe = spec.num_layers if spec.moe is None else spec.num_layers - spec.moe.num_moe_layers
    sliding = None if att.sliding_window is None else tuple(att.sliding_layers)
    spans = tuple(span for _, span in model.layer_runs)
    return _stage_shapes(spans, spec.num_layers, pp, first_moe, sliding)


@lru_cache(maxsize=1024)
def _stage_shapes(
    spans: tuple[range, ...],
    num_layers: int,
    pp: int,
    first_moe: int,
    sliding_layers: tuple[int, ...] | None,
) -> tuple[StageShape, ...]:
    # Cached on plain values: every candidate of a plan with the same PP asks again.
    stages = pipeline_stages(num_layers, pp)
    shapes: dict[tuple[object, ...], StageShape] = {}
    for index, layers in enumerate(stages):
        sliding = 0 if sliding_layers is None else sum(1 for i in sliding_layers if i in layers)
        shape = StageShape(
            layers=layers,
            runs=_runs_in(spans, layers),
            first=index == 0,
            last=index == len(stages) - 1,
            moe_layers=len(range(max(layers.start, first_moe), layers.stop)),
            full_layers=len(layers) - sliding,
            sliding_layers=sliding,
        )
        key = (shape.runs, shape.first, shape.last, shape.moe_layers, shape.sliding_layers)
        shapes.setdefault(key, shape)
    return tuple(shapes.values())


def _runs_in(spans: tuple[range, ...], layers: range) -> tuple[tuple[int, int], ...]:
    runs = []
    for index, span in enumerate(spans):
        count = min(span.stop, layers.stop) - max(span.start, layers.start)
        if count > 0:
            runs.append((index, count))
    return tuple(runs)


def kv_proj_share(model: ModelBytes, kv_proj: int, tp: int) -> int:
    """Bytes of the k/v projections one TP rank holds (at least one KV head)."""
    heads = model.num_kv_heads
    if heads == 0 or kv_proj == 0:
        return 0
    return ceil_div(kv_proj * max(1, ceil_div(heads, tp)), heads)


def expert_share(model: ModelBytes, experts: int, layout: Layout) -> int:
    """Bytes of one layer's routed experts the busiest rank of the MoE group holds."""
    if experts == 0:
        return 0
    group = layout.moe_group_size
    if layout.ep and group > 1:
        # Whole experts spread over the group; the busiest rank holds ceil(E / group).
        per_expert = ceil_div(experts, model.num_experts)
        return ceil_div(model.num_experts, group) * per_expert
    return ceil_div(experts, group)


def kv_bytes_per_token_per_layer(spec: ModelSpec, tp: int, dtype: KvCacheDtype) -> int:
    """KV cache bytes one GPU stores per token for one attention layer."""
    att = spec.attention
    elem = 1 if dtype is KvCacheDtype.FP8 else spec.dtype_bytes
    if att.mla is not None:
        # The latent is replicated on every TP rank: it does not shrink with TP.
        if att.indexer is not None and dtype is KvCacheDtype.FP8:
            latent = _FP8_DS_MLA_BYTES
        else:
            latent = att.mla.latent_dim * elem
        if att.indexer is not None:
            dim = att.indexer.head_dim
            latent += dim + dim // _INDEXER_SCALE_BLOCK * 4
        return latent
    # GQA/MHA: K and V for this rank's KV heads; at least one head when replicated.
    heads = max(1, ceil_div(att.num_kv_heads, tp))
    return 2 * heads * att.head_dim * elem


def kv_bytes_per_token_per_gpu(spec: ModelSpec, layout: Layout, dtype: KvCacheDtype) -> int:
    """Per token, on the GPU of the stage with the most layers (sliding layers included),
    shared over the layout's DCP ranks."""
    per_layer = kv_bytes_per_token_per_layer(spec, layout.tp, dtype)
    stage = max(len(r) for r in pipeline_stages(spec.num_layers, layout.pp))
    return ceil_div(per_layer * stage, layout.dcp)


def request_kv_bytes(spec: ModelSpec, layers: range, per_layer: int, tokens: int) -> int:
    """KV bytes one request of `tokens` tokens needs on a stage holding `layers`.

    Sliding-window layers keep at most the window (vLLM's hybrid KV cache manager)."""
    full, sliding = _full_and_sliding(spec, layers)
    return _request_bytes(per_layer, full, sliding, spec.attention.sliding_window, tokens)


def _full_and_sliding(spec: ModelSpec, layers: range) -> tuple[int, int]:
    att = spec.attention
    if att.sliding_window is None:
        return len(layers), 0
    sliding = sum(1 for i in att.sliding_layers if i in layers)
    return len(layers) - sliding, sliding


def _request_bytes(per_layer: int, full: int, sliding: int, window: int | None, tokens: int) -> int:
    blocks = ceil_div(tokens, KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS
    window_blocks = 0
    if window is not None and sliding:
        window_blocks = ceil_div(min(tokens, window), KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS
    return per_layer * (full * blocks + sliding * window_blocks)


@dataclass(frozen=True)
class MemoryEstimate:
    """One layout on one GPU kind, for the stage that limits the KV cache."""

    budget_bytes: int
    """memory x gpu_memory_utilization."""
    weights_bytes_per_gpu: int
    """Largest over the pipeline stages."""
    overhead_bytes: int
    """Everything but weights and KV cache on the limiting stage's GPU."""
    breakdown: Mapping[str, int]
    """The limiting stage's GPU by `MemoryTerm`; with `kv_cache_bytes` it sums to the budget
    whenever the weights fit."""
    kv_bytes_per_token_per_gpu: int
    kv_cache_bytes: int
    """What the limiting stage has left for KV (0 when weights and overhead exceed it)."""
    kv_cache_tokens: int
    """"GPU KV cache size" as vLLM logs it: tokens the cache holds, per engine (DP rank)."""
    max_model_len: int
    request_kv_bytes: int
    """KV bytes one request of `max_model_len` tokens needs on the limiting stage's GPU."""
    max_concurrency: float
    """Requests of `max_model_len` tokens the cache holds at once, per engine."""
    max_model_len_fit: int
    """The longest request that fits, rounded down to a multiple of the KV block size."""

    @property
    def weights_fit(self) -> bool:
        return self.kv_cache_bytes > 0

    @property
    def full_request_fits(self) -> bool:
        return self.max_model_len_fit >= self.max_model_len


def estimate_memory(
    spec: ModelSpec,
    model: ModelBytes,
    layout: Layout,
    gpu: GpuProfile,
    *,
    gpu_memory_utilization: float,
    kv_cache_dtype: KvCacheDtype,
    max_model_len: int,
    settings: EngineSettings,
    kv_cache_memory_bytes: int | None = None,
) -> MemoryEstimate:
    """`kv_cache_memory_bytes`: the KV space the engine is given outright (vLLM's
    `--kv-cache-memory-bytes`; VLLM_CPU_KVCACHE_SPACE on the CPU engine), which replaces
    what the budget leaves once the weights and overhead fit in it."""
    # vLLM's request_memory rounds the budget up.
    budget = -(-gpu.memory_bytes * round(gpu_memory_utilization * 10**6) // 10**6)
    shapes = stage_shapes(spec, model, layout.pp)
    shares = _run_shares(model, layout)
    per_layer = kv_bytes_per_token_per_layer(spec, layout.tp, kv_cache_dtype)
    block = kv_block_tokens(spec, gpu)
    window = spec.attention.sliding_window
    stage_terms = StageTerms(spec, layout, gpu, settings)
    weights: list[int] = []
    stages: list[_StageKv] = []
    for shape in shapes:
        stage_weights = _stage_weights(
            model, shares, shape.runs, layout.tp, first=shape.first, last=shape.last
        )
        weights.append(stage_weights)
        terms = stage_terms.breakdown(
            weights_bytes=stage_weights, layers=shape.layers, last_stage=shape.last
        )
        free = max(0, budget - sum(terms.values()))
        if kv_cache_memory_bytes is not None and free > 0:
            free = kv_cache_memory_bytes
        # DCP ranks each keep every dcp-th token of a request, so one block of a GPU's cache
        # stands for block_size x dcp tokens (vllm/v1/core/kv_cache_utils.py
        # resolve_dcp_kv_block_size).
        per_token = per_layer * len(shape.layers)
        blocks = free // (per_token * block) if per_token else 0
        full, sliding = shape.full_layers, shape.sliding_layers
        need = ceil_div(_request_bytes(per_layer, full, sliding, window, max_model_len), layout.dcp)
        stages.append(
            _StageKv(
                terms=terms,
                free=free,
                tokens=blocks * block * layout.dcp,
                need=need,
                concurrency=free / need if need else 0.0,
                fit=_longest_fit(
                    per_layer, full, sliding, window, free * layout.dcp, max_model_len
                ),
            )
        )
    # The first stage (in pipeline order) of the lowest concurrency limits the KV cache:
    # the shapes are in the order they first occur, so it is the first such shape.
    limiting = stages[min(range(len(stages)), key=lambda i: stages[i].concurrency)]
    breakdown = limiting.terms
    return MemoryEstimate(
        budget_bytes=budget,
        weights_bytes_per_gpu=max(weights),
        overhead_bytes=sum(breakdown.values()) - breakdown[MemoryTerm.WEIGHTS],
        breakdown=breakdown,
        kv_bytes_per_token_per_gpu=ceil_div(
            per_layer * max(len(shape.layers) for shape in shapes), layout.dcp
        ),
        kv_cache_bytes=limiting.free,
        kv_cache_tokens=min(stage.tokens for stage in stages),
        max_model_len=max_model_len,
        request_kv_bytes=limiting.need,
        max_concurrency=limiting.concurrency,
        max_model_len_fit=min(stage.fit for stage in stages),
    )


class _StageKv(NamedTuple):
    """One pipeline stage's GPU in `estimate_memory` (a tuple: cheaper to make than a
    frozen dataclass, and a plan makes thousands)."""

    terms: Mapping[str, int]
    free: int
    tokens: int
    need: int
    concurrency: float
    fit: int


def _longest_request(
    spec: ModelSpec, layers: range, per_layer: int, free: int, ceiling: int
) -> int:
    """Largest length (a block multiple, or `ceiling` itself) whose request fits in `free`."""
    full, sliding = _full_and_sliding(spec, layers)
    return _longest_fit(per_layer, full, sliding, spec.attention.sliding_window, free, ceiling)


def _longest_fit(
    per_layer: int, full: int, sliding: int, window: int | None, free: int, ceiling: int
) -> int:
    """`_longest_request` for a stage of `full` full-attention and `sliding` sliding-window
    layers."""

    def fits(tokens: int) -> bool:
        return _request_bytes(per_layer, full, sliding, window, tokens) <= free

    if fits(ceiling):
        return ceiling
    low, high = 0, ceiling // KV_BLOCK_TOKENS
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid * KV_BLOCK_TOKENS):
            low = mid
        else:
            high = mid - 1
    return low * KV_BLOCK_TOKENS


def with_observed_kv(
    estimate: MemoryEstimate, spec: ModelSpec, layout: Layout, kv_cache_tokens: int
) -> MemoryEstimate:
    """`estimate` with the KV cache an engine of the same deployment logged: its tokens, the
    bytes they take on the limiting stage's GPU, and what follows from them."""
    stage = max(pipeline_stages(spec.num_layers, layout.pp), key=len)
    per_token = estimate.kv_bytes_per_token_per_gpu
    free = kv_cache_tokens * per_token
    per_layer = ceil_div(per_token * layout.dcp, len(stage))
    return replace(
        estimate,
        kv_cache_bytes=free,
        kv_cache_tokens=kv_cache_tokens,
        max_concurrency=free / estimate.request_kv_bytes if estimate.request_kv_bytes else 0.0,
        max_model_len_fit=_longest_request(
            spec, stage, per_layer, free * layout.dcp, estimate.max_model_len
        ),
    )
