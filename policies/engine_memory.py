"""What a vLLM engine allocates on one GPU besides weights and KV cache, term by term.

vLLM's GPU worker (vllm/v1/worker/gpu_worker.py `determine_available_memory`, with
vllm/utils/mem_utils.py `memory_profiling`) gives the KV cache

    requested (= total x gpu_memory_utilization)
      - non_kv  (= weights + everything allocated since the init snapshot that stays,
                   + the transient peak of the profiling run above what stays)
      - CUDA-graph estimate (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, on by default)

The init snapshot is taken after the CUDA context and the distributed init
(`init_device`), so the context lives in the `1 - gpu_memory_utilization` headroom: vLLM
refuses to start when the free memory at that point is below the request (`request_memory`
in vllm/v1/worker/utils.py). Each function below is one term of `non_kv` or that check, for
one GPU of one pipeline stage, with the vLLM code it mirrors. Sizes are element counts times
the activation dtype (bf16 for every checkpoint the policy knows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from types import MappingProxyType

from policies.checkpoint.model_spec import ModelSpec
from policies.inventory import GpuProfile, Interconnect
from policies.layout import Layout
from policies.units import GIB, MIB, ceil_div
from policies.vllm_versions import SamplerPath


class MemoryTerm(StrEnum):
    """The keys of a candidate's `memory_breakdown` (bytes per GPU, limiting stage)."""

    WEIGHTS = "weights"
    """The stage's weights as loaded ("Model loading took X GiB")."""
    MOE_WORKSPACE = "moe_workspace"
    """The fused-MoE workspace, kept at its high-water mark after profiling."""
    ACTIVATION_PEAK = "activation_peak"
    """The profiling run's transient peak: the forward pass or the sampler, whichever is larger."""
    CUDA_GRAPHS = "cuda_graphs"
    """vLLM's estimate of the CUDA-graph pool, subtracted before the KV cache."""
    COMMUNICATION = "communication"
    """NCCL and custom all-reduce buffers allocated after the init snapshot."""
    RUNTIME = "runtime"
    """Other non-torch memory after the snapshot (cuBLAS workspaces, kernel modules) and the
    sampler's persistent top-k/top-p buffer."""


@dataclass(frozen=True)
class FittedConstants:
    """The memory model's constants that are fitted to logs rather than read from vLLM's
    code. The defaults are fitted to the whole calibration set
    (`python -m benchmarks run kv-calibration`, which also predicts every log with the
    constants fitted to the others only)."""

    graph_bytes_per_dense_layer: int = 192 * 1024
    """CUDA-graph memory per captured size and per dense decoder layer (a MoE layer counts
    twice: it launches about twice the kernels)."""
    runtime_bytes: int = 384 * MIB
    """Non-torch memory after vLLM's snapshot that no term models: cuBLAS/cuBLASLt
    workspaces and the CUDA modules of the kernels the profiling run loads."""


@dataclass(frozen=True)
class EngineSettings:
    """The engine settings the non-KV memory depends on."""

    max_num_batched_tokens: int
    max_num_seqs: int
    enforce_eager: bool = False
    cuda_graphs_subtracted: bool = True
    """The vLLM version subtracts its CUDA-graph estimate before sizing the KV cache
    (`policies.vllm_versions.MemoryRules`); otherwise the graphs take the headroom."""
    constants: FittedConstants = FittedConstants()
    full_cuda_graphs: bool = True
    """FULL_AND_PIECEWISE (vLLM's default); False for `cudagraph_mode: PIECEWISE`."""
    capture_grid_2025: bool = True
    """vLLM 0.12's capture sizes (every 8 to 256, then every 16); else every 8 to 512."""
    init_communicators_subtracted: bool = False
    """Start-up communicator buffers count against the budget (vLLM 0.10 only)."""
    sampler: SamplerPath = SamplerPath.TRITON
    """The version's top-k/top-p path (`policies.vllm_versions.sampler_path`)."""

    @property
    def sampler_rows(self) -> int:
        """The dummy sampler's rows: one per request, as many as a step can hold."""
        return min(self.max_num_seqs, self.max_num_batched_tokens)

    @property
    def sampler_in_use(self) -> SamplerPath:
        """The path the dummy sampler takes: the Triton kernel only for 8 rows or more
        (`apply_top_k_top_p`), the sort below."""
        if self.sampler is SamplerPath.TRITON and self.sampler_rows < _TRITON_MIN_ROWS:
            return SamplerPath.TORCH_SORT
        return self.sampler


_FP32 = 4
_INT64 = 8
_TRITON_MIN_ROWS = 8
# Bytes per logit the sampler's top-k/top-p holds besides the fp32 logits it works on:
# FlashInfer a top-k-masked copy and its softmax; the sort its sorted values and int64
# indices, the int64 index input SortStable.cu fills, and the alternate key and value
# buffers of CUB's segmented radix sort (ATen's wrapper does not let CUB overwrite its
# input); Triton works in place. After it, softmax and `random_sample`'s exponential noise
# (two fp32 copies) are live at once on every path.
_TOP_K_TOP_P_BYTES = {
    SamplerPath.FLASHINFER: 2 * _FP32,
    SamplerPath.TORCH_SORT: _FP32 + _INT64 + _INT64 + _FP32 + _INT64,
    SamplerPath.TRITON: 0,
}
_SAMPLING_BYTES = 2 * _FP32

# vLLM's CPU worker has no profiler; the old flat allowance stands in for its allocator slack.
_HOST_RUNTIME_BYTES = GIB // 2
# One NCCL communicator's lazily allocated channel buffers (NCCL_BUFFSIZE 4 MiB per channel
# and peer for the Simple protocol, plus LL/LL128): NVLink rings use many channels, PCIe few.
_NCCL_GROUP_BYTES = {Interconnect.NVLINK: 256 * MIB, Interconnect.PCIE: 128 * MIB}
# Custom all-reduce (vllm/distributed/device_communicators/custom_all_reduce.py): an 8 MiB
# IPC buffer plus its metadata per rank, and the CUDA-graph inputs it registers.
_CUSTOM_ALL_REDUCE_BYTES = 64 * MIB
# CUDA-graph memory per captured size and per decoder layer (`FittedConstants`): vLLM
# measures the second capture of each mode and multiplies (profile_cudagraph_memory); a MoE
# layer launches about twice the kernels of a dense one.
_MOE_LAYER_GRAPH_FACTOR = 2
# The CUDA context and the allocator's first segment, outside the budget (seen by the driver
# before vLLM's snapshot); 500-600 MiB on Hopper and Blackwell with lazy module loading.
CUDA_CONTEXT_BYTES = 600 * MIB


def moe_workspace_bytes(spec: ModelSpec, layout: Layout, gpu: GpuProfile, tokens: int) -> int:
    """TritonExperts.workspace_shapes (fused_moe/experts/triton_moe.py) at M = `tokens`:
    workspace13 = M x top-k x max(I, K) (it also holds the M x K output) and
    workspace2 = M x top-k x max(2I, K), I the per-rank expert width and K the hidden size
    (Marlin's INT4 kernel asks the same); `_allocate_buffers` (modular_kernel.py) takes them
    from the workspace manager, which keeps the high-water mark. With expert and data
    parallel the tokens of all DP ranks meet on each rank. vLLM's CPU kernels keep only the
    M x K output."""
    moe = spec.moe
    if moe is None:
        return 0
    act = spec.dtype_bytes
    hidden = spec.hidden_size
    if gpu.interconnect is Interconnect.HOST_MEMORY:
        return tokens * hidden * act
    m = tokens * (layout.dp if layout.ep else 1)
    width = moe.expert_intermediate_size // layout.moe_split
    k = moe.experts_per_token
    return act * m * k * (max(width, hidden) + max(2 * width, hidden))


def forward_transient_bytes(spec: ModelSpec, layout: Layout, tokens: int) -> int:
    """The live activations of one decoder layer for `tokens` tokens (`_dummy_run`): the
    hidden state and residual with their norm and quantized copies (about 4 hidden-sized
    tensors), this rank's q/k/v (attention itself is skipped while profiling: no KV cache
    yet), the widest dense or shared-expert MLP of this rank (gate_up output 2I plus the
    activation's I), and the router logits in fp32."""
    tp = layout.tp
    att = spec.attention
    act = spec.dtype_bytes
    heads = ceil_div(att.num_heads, tp)
    if att.mla is not None:
        qkv = heads * att.head_dim + att.mla.latent_dim
    else:
        qkv = (heads + 2 * max(1, ceil_div(att.num_kv_heads, tp))) * att.head_dim
    mlp = ceil_div(spec.dense_intermediate_size, tp) if spec.num_dense_layers else 0
    router = 0
    if spec.moe is not None:
        mlp = max(mlp, ceil_div(spec.moe.shared_intermediate_size, tp))
        router = spec.moe.num_experts * _FP32
    per_token = act * (4 * spec.hidden_size + qkv + 3 * mlp) + router
    return tokens * per_token


def sampler_peak_bytes(spec: ModelSpec, settings: EngineSettings) -> int:
    """`_dummy_sampler_run` on the last stage: `sampler_rows` rows of logits over the whole
    vocabulary (gathered over TP, bf16) and their fp32 copy in `Sampler.forward`, plus the
    larger of what top-k/top-p holds on the version's path and what sampling holds after it
    (vllm/v1/sample/sampler.py, ops/topk_topp_sampler.py). The dummy run's hidden states
    for all tokens are still alive."""
    per_logit = spec.dtype_bytes + _FP32
    per_logit += max(_TOP_K_TOP_P_BYTES[settings.sampler_in_use], _SAMPLING_BYTES)
    logits = settings.sampler_rows * spec.vocab_size * per_logit
    return logits + settings.max_num_batched_tokens * spec.hidden_size * spec.dtype_bytes


def activation_peak_bytes(
    spec: ModelSpec, layout: Layout, settings: EngineSettings, *, last_stage: bool
) -> int:
    """The transient peak of `profile_run`: the forward pass and the sampler run one after
    the other, so the larger of the two (`memory_profiling`: torch peak minus what stays)."""
    forward = forward_transient_bytes(spec, layout, settings.max_num_batched_tokens)
    sampler = sampler_peak_bytes(spec, settings) if last_stage else 0
    return max(forward, sampler)


def capture_sizes(settings: EngineSettings, gpu: GpuProfile) -> tuple[int, ...]:
    """vLLM's default CUDA-graph capture sizes (vllm/config/vllm.py): up to
    min(2 x max_num_seqs, 512; 1024 on SM10x), as [1, 2, 4], then every 8 below 256, then
    every 16, never above max_num_batched_tokens."""
    family_100 = gpu.compute_capability is not None and gpu.compute_capability[0] == 10
    largest = min(2 * settings.max_num_seqs, 1024 if family_100 else 512)
    largest = min(largest, settings.max_num_batched_tokens)
    sizes = [s for s in (1, 2, 4) if s <= largest]
    if not settings.capture_grid_2025:
        # vLLM before 0.12: [1, 2, 4] + every 8 up to min(2 x max_num_seqs, 512).
        return (*sizes, *range(8, largest + 1, 8))
    sizes += range(8, min(largest + 1, 256), 8)
    sizes += range(256, largest + 1, 16)
    if largest not in sizes:
        sizes.append(largest)
    return tuple(sizes)


def cuda_graph_bytes(
    spec: ModelSpec,
    layout: Layout,
    gpu: GpuProfile,
    settings: EngineSettings,
    layers: range,
) -> int:
    """`profile_cudagraph_memory` (gpu_model_runner.py) for FULL_AND_PIECEWISE, vLLM's
    default: per mode the first capture (the largest size's activations) plus the others
    at the per-graph cost; FULL graphs cover the uniform-decode sizes up to max_num_seqs,
    PIECEWISE all of them; the two modes share one pool, so only one first capture counts.
    Nothing on a device that captures no graphs or with enforce_eager."""
    if not gpu.cuda_graphs or settings.enforce_eager:
        return 0
    count, full, largest = _graph_counts(settings, gpu)
    first = forward_transient_bytes(spec, layout, largest)
    return _graph_pool_bytes(
        first, count + full - 1, settings, len(layers), moe_layers_in(spec, layers)
    )


def _graph_pool_bytes(
    first: int, more_graphs: int, settings: EngineSettings, num_layers: int, moe_layers: int
) -> int:
    """The first capture's activations plus `more_graphs` graphs at the per-graph cost."""
    per_dense = settings.constants.graph_bytes_per_dense_layer
    per_graph = (
        moe_layers * _MOE_LAYER_GRAPH_FACTOR * per_dense + (num_layers - moe_layers) * per_dense
    )
    return first + more_graphs * per_graph


@lru_cache(maxsize=256)
def _graph_counts(settings: EngineSettings, gpu: GpuProfile) -> tuple[int, int, int]:
    """(capture sizes, FULL graphs among them, the largest size). Cached: every pipeline
    stage of every candidate layout with the same engine settings captures the same sizes,
    and listing them was a good part of a large cluster's plan."""
    sizes = capture_sizes(settings, gpu)
    full = sum(1 for s in sizes if s <= settings.max_num_seqs) if settings.full_cuda_graphs else 0
    return len(sizes), full, max(sizes)


def moe_layers_in(spec: ModelSpec, layers: range) -> int:
    if spec.moe is None:
        return 0
    # MoE models put their dense layers first (first_k_dense_replace).
    first_moe = spec.num_layers - spec.moe.num_moe_layers
    if layers.step == 1:
        # A stage's contiguous layers: the MoE ones are its tail from `first_moe` on.
        return len(range(max(layers.start, first_moe), layers.stop))
    return sum(1 for i in layers if i >= first_moe)


def communication_bytes(
    layout: Layout, gpu: GpuProfile, *, init_buffers_subtracted: bool = False
) -> int:
    """Buffers of the communicators a forward pass uses, allocated on first use: the TP
    group's NCCL channels, custom all-reduce where vLLM enables it (NVLink up to 8 ranks;
    on PCIe only for 2), the MoE all-to-all group's when data parallel joins it, and
    pipeline send/receive."""
    nccl = _NCCL_GROUP_BYTES.get(gpu.interconnect)
    if nccl is None:
        return 0
    total = 0
    if layout.tp > 1:
        total += nccl
        custom = layout.tp <= 8 and (gpu.interconnect is Interconnect.NVLINK or layout.tp == 2)
        # Its IPC buffers are made when the communicator starts: before vLLM's memory
        # snapshot from 0.11 on (out of the headroom), after it in 0.10.
        if custom and init_buffers_subtracted:
            total += _CUSTOM_ALL_REDUCE_BYTES
    if layout.dp > 1 and layout.ep:
        total += nccl
    if layout.pp > 1:
        total += nccl
    return total


def runtime_bytes(
    spec: ModelSpec,
    gpu: GpuProfile,
    *,
    last_stage: bool,
    constants: FittedConstants = FittedConstants(),
    sampler: SamplerPath = SamplerPath.TRITON,
) -> int:
    """Non-torch memory after the snapshot, plus the Triton top-k/top-p buffer the sampler
    keeps where it samples with Triton (one fp32 vocabulary row per SM, topk_topp_triton.py
    `_TRITON_BUFFER_CACHE`)."""
    if gpu.interconnect is Interconnect.HOST_MEMORY:
        return _HOST_RUNTIME_BYTES
    triton = last_stage and sampler is SamplerPath.TRITON
    buffer = gpu.sm_count * spec.vocab_size * _FP32 if triton else 0
    return constants.runtime_bytes + buffer


def cuda_context_bytes(gpu: GpuProfile) -> int:
    """The CUDA context, outside `gpu_memory_utilization` (see the module docstring)."""
    return 0 if gpu.interconnect is Interconnect.HOST_MEMORY else CUDA_CONTEXT_BYTES


def non_kv_breakdown(
    spec: ModelSpec,
    layout: Layout,
    gpu: GpuProfile,
    settings: EngineSettings,
    *,
    weights_bytes: int,
    layers: range,
    last_stage: bool,
) -> Mapping[str, int]:
    """Every term of one stage's GPU but the KV cache, keyed by `MemoryTerm`."""
    return StageTerms(spec, layout, gpu, settings).breakdown(
        weights_bytes=weights_bytes, layers=layers, last_stage=last_stage
    )


class StageTerms:
    """`non_kv_breakdown` for the pipeline stages of one layout and engine. The terms that
    are the same on every stage (the MoE workspace, the communicators, the forward pass's
    activations) are worked out once per layout rather than once per stage: a large
    cluster's plan judges thousands of layouts of several stages each."""

    def __init__(
        self, spec: ModelSpec, layout: Layout, gpu: GpuProfile, settings: EngineSettings
    ) -> None:
        self._spec = spec
        self._layout = layout
        self._gpu = gpu
        self._settings = settings
        self._moe_workspace: int | None = None
        self._activation: dict[bool, int] = {}
        self._runtime: dict[bool, int] = {}
        self._first_graph: tuple[int, int] | None = None
        self._communication = communication_bytes(
            layout, gpu, init_buffers_subtracted=settings.init_communicators_subtracted
        )

    def breakdown(
        self, *, weights_bytes: int, layers: range, last_stage: bool
    ) -> Mapping[str, int]:
        """`non_kv_breakdown` of the stage holding `layers`."""
        spec, settings = self._spec, self._settings
        moe_layers = moe_layers_in(spec, layers)
        moe_workspace = 0
        if moe_layers > 0:
            if self._moe_workspace is None:
                self._moe_workspace = moe_workspace_bytes(
                    spec, self._layout, self._gpu, settings.max_num_batched_tokens
                )
            moe_workspace = self._moe_workspace
        activation = self._activation.get(last_stage)
        if activation is None:
            activation = self._activation[last_stage] = activation_peak_bytes(
                spec, self._layout, settings, last_stage=last_stage
            )
        runtime = self._runtime.get(last_stage)
        if runtime is None:
            runtime = self._runtime[last_stage] = runtime_bytes(
                spec,
                self._gpu,
                last_stage=last_stage,
                constants=settings.constants,
                sampler=settings.sampler_in_use,
            )
        terms = {
            MemoryTerm.WEIGHTS: weights_bytes,
            MemoryTerm.MOE_WORKSPACE: moe_workspace,
            MemoryTerm.ACTIVATION_PEAK: activation,
            MemoryTerm.CUDA_GRAPHS: (
                self._cuda_graphs(len(layers), moe_layers) if settings.cuda_graphs_subtracted else 0
            ),
            MemoryTerm.COMMUNICATION: self._communication,
            MemoryTerm.RUNTIME: runtime,
        }
        return MappingProxyType({str(k): v for k, v in terms.items()})

    def _cuda_graphs(self, num_layers: int, moe_layers: int) -> int:
        """`cuda_graph_bytes`, its first capture and graph count worked out once."""
        gpu, settings = self._gpu, self._settings
        if not gpu.cuda_graphs or settings.enforce_eager:
            return 0
        if self._first_graph is None:
            count, full, largest = _graph_counts(settings, gpu)
            self._first_graph = (
                forward_transient_bytes(self._spec, self._layout, largest),
                count + full - 1,
            )
        first, more_graphs = self._first_graph
        return _graph_pool_bytes(first, more_graphs, settings, num_layers, moe_layers)
