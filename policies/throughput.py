"""Throughput at load: the aggregate decode tokens/s a layout can sustain when its batch is full.

`policies.cost_model` prices one sequence; under load an engine decodes a batch of B
sequences per step, and the step's cost changes regime:

- memory: each GPU reads its stage's weights once per step (for MoE, the experts the
  batch's tokens touch: a fraction 1 - (1 - k/E)^B of them) and every sequence's KV cache;
- compute: 2 FLOPs per active parameter per token at the tensor-core peak of the weights'
  dtype (fp8 or fp4 where the GPU has those tensor cores and the checkpoint stores them;
  bf16 otherwise, as Marlin dequantizes INT4), plus attention's 4 x heads x head_dim FLOPs
  per context token at bf16;
- communication: two TP all-reduces per layer of B hidden vectors (three with a q/k norm
  across heads), the MoE dispatch and
  combine when data parallel joins the expert group, DCP's attention merge; over the
  node's link, or the network between nodes.

A step costs max(memory, compute) + communication. With pipeline parallelism vLLM keeps pp
micro-batches of B/pp in flight; every stage runs each of them, so a round of B tokens takes
pp x the slowest stage (a stage with more layers is the bubble the others wait for).

    throughput = B / (pp x max over stages of stage_time(B / pp))

B is `saturation_concurrency`: sequences of `THROUGHPUT_CONTEXT_TOKENS` the KV cache holds,
at most max_num_seqs. Like the single-stream figure this is a ceiling (kernel efficiency,
scheduling and prefill are not priced); its job is ranking layouts for throughput.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.checkpoint.model_spec import ModelSpec
from policies.checkpoint.module_groups import ModuleGroup
from policies.checkpoint.parameters import ModelBytes
from policies.checkpoint.quantization import QuantFormat
from policies.cost_model import collective_s, link_for, tp_norm_reduce_s
from policies.inventory import GpuProfile
from policies.layout import Layout
from policies.memory import (
    KvCacheDtype,
    expert_share,
    kv_bytes_per_token_per_layer,
    kv_proj_share,
    stage_runs,
)
from policies.units import ceil_div

THROUGHPUT_CONTEXT_TOKENS = 1024
"""Context per sequence at which throughput is quoted (the single-stream figure's too)."""
_ACTIVATION_BYTES = 2


@dataclass(frozen=True)
class Throughput:
    saturation_concurrency: int
    """Sequences decoded at once per engine (DP rank): KV-bound, at most max_num_seqs."""
    tokens_per_second: float
    """Aggregate over the layout's DP ranks."""
    step_s: float
    """One round of `saturation_concurrency` tokens per DP rank."""
    memory_bound: bool
    """Whether the slowest stage is limited by memory rather than compute."""


def saturation_concurrency(kv_cache_tokens: int, max_num_seqs: int, context_tokens: int) -> int:
    """How many sequences of `context_tokens` the cache holds at once, at most max_num_seqs."""
    return max(0, min(max_num_seqs, kv_cache_tokens // context_tokens))


def peak_flops(gpu: GpuProfile, spec: ModelSpec, group: ModuleGroup) -> float:
    """FLOP/s for the matmuls of one module group: the dtype its weights are computed in."""
    quant = spec.quantization
    bf16 = gpu.bf16_tflops * 1e12
    if group not in quant.quantized_groups:
        return bf16
    if quant.format in (QuantFormat.FP8, QuantFormat.FP8_BLOCK) and gpu.fp8_tflops:
        return gpu.fp8_tflops * 1e12
    if quant.format in (QuantFormat.NVFP4, QuantFormat.MXFP4) and gpu.fp4_tflops:
        return gpu.fp4_tflops * 1e12
    return bf16


def throughput(
    spec: ModelSpec,
    model: ModelBytes,
    layout: Layout,
    gpu: GpuProfile,
    *,
    kv_cache_dtype: KvCacheDtype,
    gpus_per_node: int,
    kv_cache_tokens: int,
    max_num_seqs: int,
    context_tokens: int = THROUGHPUT_CONTEXT_TOKENS,
) -> Throughput:
    """The sustained decode throughput of `layout` (see the module docstring)."""
    batch = saturation_concurrency(kv_cache_tokens, max_num_seqs, context_tokens)
    if batch == 0 or gpu.bf16_tflops <= 0:
        return Throughput(batch, 0.0, 0.0, True)
    micro = max(1.0, batch / layout.pp)
    pricing = _StagePricing(
        spec,
        model,
        layout,
        gpu,
        micro=micro,
        kv_cache_dtype=kv_cache_dtype,
        gpus_per_node=gpus_per_node,
        context_tokens=context_tokens,
    )
    stages = stage_runs(model, layout.pp)
    # Stages with the same runs of layers cost the same: a deep pipeline prices a few.
    priced: dict[tuple[tuple[tuple[int, int], ...], bool], tuple[float, bool]] = {}
    stage_times: list[tuple[float, bool]] = []
    for index, runs in enumerate(stages):
        key = (runs, index == len(stages) - 1)
        stage_time = priced.get(key)
        if stage_time is None:
            stage_time = priced[key] = pricing.stage_time(*key)
        stage_times.append(stage_time)
    slowest, memory_bound = max(stage_times)
    step = layout.pp * slowest
    return Throughput(batch, layout.dp * batch / step, step, memory_bound)


class _StagePricing:
    """One layout's decode step per pipeline stage at `micro` sequences. What is the same
    for every stage (dtypes, peaks, the layer's collectives, each run of identical layers'
    reads) is worked out once per layout; a stage then adds up its layers' terms in layer
    order, so the sums are the same floating-point sums as layer by layer."""

    def __init__(
        self,
        spec: ModelSpec,
        model: ModelBytes,
        layout: Layout,
        gpu: GpuProfile,
        *,
        micro: float,
        kv_cache_dtype: KvCacheDtype,
        gpus_per_node: int,
        context_tokens: int,
    ) -> None:
        tp = layout.tp
        group = layout.moe_group_size
        quant = spec.quantization
        att = spec.attention
        expert_bpp = quant.bytes_per_param_of(ModuleGroup.ROUTED_EXPERTS, spec.dtype_bytes)
        dense_bpp = quant.bytes_per_param_of(ModuleGroup.ATTENTION, spec.dtype_bytes)
        touched = 1.0
        if model.num_experts:
            touched = 1.0 - (1.0 - model.experts_per_token / model.num_experts) ** micro
        # Per run of identical layers: (dense bytes, dense params, expert bytes read, expert
        # params), the expert terms None for a dense layer.
        self._runs: list[tuple[int, float, float | None, float | None]] = []
        for lb, _ in model.layer_runs:
            dense = ceil_div(lb.split, tp) + lb.replicated + kv_proj_share(model, lb.kv_proj, tp)
            expert_read = expert_params = None
            if lb.experts:
                expert_read = expert_share(model, lb.experts, layout) * touched
                # Per token the rank computes its share of the top-k experts.
                share = model.experts_per_token / model.num_experts / group
                expert_params = lb.experts * share / expert_bpp
            self._runs.append((dense, dense / dense_bpp, expert_read, expert_params))
        self._lm_head = ceil_div(model.lm_head, tp)
        self._lm_head_params = ceil_div(model.lm_head, tp) / spec.dtype_bytes
        kv_per_layer = kv_bytes_per_token_per_layer(spec, tp, kv_cache_dtype)
        self._kv_read_unit = micro * context_tokens * kv_per_layer
        self._dcp = layout.dcp
        self._bandwidth = gpu.hbm_bandwidth_gbps * 1e9
        heads = ceil_div(att.num_heads, tp)
        self._attention_flops_unit = 4 * heads * att.head_dim * context_tokens / layout.dcp
        self._micro = micro
        self._dense_peak = peak_flops(gpu, spec, ModuleGroup.ATTENTION)
        self._expert_peak = peak_flops(gpu, spec, ModuleGroup.ROUTED_EXPERTS)
        self._bf16_peak = gpu.bf16_tflops * 1e12
        self._comm_per_layer = _per_layer_comm_s(spec, layout, gpu, micro, gpus_per_node)

    def stage_time(self, runs: tuple[tuple[int, int], ...], last: bool) -> tuple[float, bool]:
        """(seconds, memory-bound) of a stage holding `runs` (`policies.memory.stage_runs`)."""
        read = 0.0
        dense_params = expert_params = 0.0
        num_layers = 0
        for run, count in runs:
            dense, dense_param, expert_read, expert_param = self._runs[run]
            num_layers += count
            for _ in range(count):
                read += dense
                dense_params += dense_param
                if expert_read is not None and expert_param is not None:
                    read += expert_read
                    expert_params += expert_param
        if last:
            read += self._lm_head
            dense_params += self._lm_head_params
        kv_read = self._kv_read_unit * num_layers / self._dcp
        memory_s = (read + kv_read) / self._bandwidth
        attention_flops = self._attention_flops_unit * num_layers
        compute_s = self._micro * (
            2 * dense_params / self._dense_peak
            + 2 * expert_params / self._expert_peak
            + attention_flops / self._bf16_peak
        )
        comm_s = num_layers * self._comm_per_layer
        return max(memory_s, compute_s) + comm_s, memory_s >= compute_s


def _per_layer_comm_s(
    spec: ModelSpec, layout: Layout, gpu: GpuProfile, micro: float, gpus_per_node: int
) -> float:
    payload = int(micro * spec.hidden_size * _ACTIVATION_BYTES)
    step, link = link_for(gpu, crosses_nodes=layout.tp > gpus_per_node)
    total = 2 * collective_s(layout.tp, payload, step, link)
    total += tp_norm_reduce_s(spec, micro, layout.tp, step, link)
    total += collective_s(layout.dcp, payload, step, link)
    if layout.dp > 1 and spec.moe is not None:
        group = layout.moe_group_size
        moe_step, moe_link = link_for(gpu, crosses_nodes=group > gpus_per_node)
        total += 2 * collective_s(group, payload * layout.dp, moe_step, moe_link)
    return total
