"""The batch limits vLLM picks when the operator sets none, as a pure table.

vLLM's `EngineArgs.get_batch_defaults` (vllm/engine/arg_utils.py) chooses
`max_num_batched_tokens` and `max_num_seqs` from the device's total memory, its name and the
usage context. Switchyard's engines run behind Ray Serve LLM, which builds them with
`UsageContext.OPENAI_API_SERVER` (ray/llm/_internal/serve/engines/vllm/vllm_engine.py), so that
is the default context here. The profiling run sizes its activations, its sampler and its
CUDA graphs from these two numbers, so the memory model needs them before any engine starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from policies.inventory import GpuProfile, Interconnect
from policies.units import GIB


class UsageContext(StrEnum):
    """vLLM's `UsageContext` values that change the batch defaults."""

    OPENAI_API_SERVER = "openai_api_server"
    """`vllm serve` and Ray Serve LLM (Switchyard's engines)."""
    LLM_CLASS = "llm_class"
    """The offline `vllm.LLM` class."""


@dataclass(frozen=True)
class BatchLimits:
    max_num_batched_tokens: int
    max_num_seqs: int


# (memory floor in GiB, excluded name fragment, server limits, offline limits), first match
# wins; vLLM's own comment: large token budgets slow the A100 down (vLLM PR #17885).
_CUDA_TABLE: tuple[tuple[int, str | None, BatchLimits, BatchLimits], ...] = (
    (160, None, BatchLimits(16384, 1024), BatchLimits(16384, 1024)),
    (70, "a100", BatchLimits(8192, 1024), BatchLimits(16384, 1024)),
    (0, None, BatchLimits(2048, 256), BatchLimits(8192, 256)),
)
# vLLM's CPU platform scales with the world size instead.
_CPU_SERVER_PER_RANK = BatchLimits(2048, 128)
_CPU_OFFLINE_PER_RANK = BatchLimits(4096, 256)


def batch_defaults(
    gpu: GpuProfile,
    *,
    world_size: int = 1,
    usage: UsageContext = UsageContext.OPENAI_API_SERVER,
) -> BatchLimits:
    """`max_num_batched_tokens` and `max_num_seqs` vLLM defaults to on `gpu`."""
    if gpu.interconnect is Interconnect.HOST_MEMORY:
        is_server = usage is UsageContext.OPENAI_API_SERVER
        per_rank = _CPU_SERVER_PER_RANK if is_server else _CPU_OFFLINE_PER_RANK
        return BatchLimits(
            per_rank.max_num_batched_tokens * world_size, per_rank.max_num_seqs * world_size
        )
    names = (gpu.name, *gpu.aliases)
    for floor_gib, excluded, server, offline in _CUDA_TABLE:
        if gpu.memory_bytes < floor_gib * GIB:
            continue
        if excluded is not None and any(excluded in name for name in names):
            continue
        return server if usage is UsageContext.OPENAI_API_SERVER else offline
    raise AssertionError("the last row has no floor")  # pragma: no cover
