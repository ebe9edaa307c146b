"""What an engine holds, as the planner predicted it and as vLLM logged it at start-up.

Every engine start records both sides next to each other (cluster/fleet/bring_up.py), so the
fleet can show how far the memory model is from its own engines (`status --json`'s
`capacity` key, the `switchyard_manager_kv_prediction_ratio` gauge) and admission can use an
engine's own figure the next time the same deployment is judged (`CapacityKey`; the
verdict's `kv_source` says which was used, `policies.admission.KvSource`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from domain.deployment_config import ModelDeploymentConfig


class CapacityFigures(BaseModel):
    """One side of a deployment's capacity, per engine (one GPU of the limiting stage for
    the memory figures); None where that side does not know a figure."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    weights_gib: float | None = None
    """"Model loading took X GiB" (the GPU worker logs it; vLLM's CPU worker does not)."""
    kv_cache_gib: float | None = None
    """"Available KV cache memory" (GPU) or the space the CPU engine was given."""
    kv_cache_tokens: int | None = None
    """"GPU KV cache size" / "CPU KV cache size": tokens the cache holds."""
    cuda_graph_gib: float | None = None
    """CUDA-graph memory where vLLM prints it (its estimate, or what capture took)."""

    @property
    def empty(self) -> bool:
        return all(v is None for v in self.model_dump().values())


class ModelCapacity(BaseModel):
    """A served model's capacity: the prediction admission made for its deployment and what
    its engine logged when it started."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    predicted: CapacityFigures = CapacityFigures()
    observed: CapacityFigures = CapacityFigures()
    key: str = ""
    """The deployment's `CapacityKey` digest: what the observed figures are valid for."""

    @property
    def kv_prediction_ratio(self) -> float | None:
        """Observed over predicted KV tokens, where both are known."""
        observed, predicted = self.observed.kv_cache_tokens, self.predicted.kv_cache_tokens
        if observed is None or not predicted:
            return None
        return observed / predicted


class CapacityKey(BaseModel):
    """Everything vLLM's KV sizing depends on for one deployment: an observed figure is
    reused only for a deployment whose key is equal."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    config_digest: str
    """The model's config.json (its bytes' digest): same architecture, same checkpoint."""
    gpu_profile: str
    layout: str
    vllm_version: str
    engine: dict[str, str | int | float | bool | None]
    """The memory-relevant engine settings (context, batch limits, KV dtype, memory share,
    eager mode, explicit KV space)."""
    environment: dict[str, str]
    """Memory-relevant variables (the CUDA-graph estimate and sampler flags) and sleep
    mode."""

    def digest(self) -> str:
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:24]


_MEMORY_ENGINE_FIELDS = (
    "max_model_len",
    "gpu_memory_utilization",
    "kv_cache_dtype",
    "enforce_eager",
    "max_num_seqs",
    "max_num_batched_tokens",
    # A typed field (a fleet entry's `park_mode: sleep` sets it): vLLM's sleep-mode
    # allocator (CuMemAllocator) holds the weights and KV cache, so its engine may log
    # other figures than the same engine without it.
    "enable_sleep_mode",
)
# Engine arguments outside EngineConfig's own fields that change what vLLM subtracts before
# it sizes the KV cache (they travel in `engine.extra`).
_MEMORY_EXTRA_ARGS = (
    "kv_cache_memory_bytes",
    "language_model_only",
    "cudagraph_capture_sizes",
    "compilation_config",
    "block_size",
)


def capacity_key(
    config: ModelDeploymentConfig,
    *,
    config_json: bytes,
    gpu_profile: str,
    vllm_version: str,
    environment: Mapping[str, str],
) -> CapacityKey:
    """The key of `config`'s deployment on `gpu_profile` GPUs under `vllm_version`, with
    the memory-relevant `environment` the engines get."""
    engine = config.engine
    settings: dict[str, str | int | float | bool | None] = {
        name: getattr(engine, name) for name in _MEMORY_ENGINE_FIELDS
    }
    for name in _MEMORY_EXTRA_ARGS:
        if name in engine.extra:
            settings[name] = json.dumps(engine.extra[name], sort_keys=True)
    if config.accelerator.kind == "cpu":
        settings["cpu_kv_cache_space_gib"] = config.accelerator.cpu_kv_cache_space_gib
    return CapacityKey(
        config_digest=hashlib.sha256(config_json).hexdigest()[:24],
        gpu_profile=gpu_profile,
        layout=str(config.layout),
        vllm_version=vllm_version,
        engine=settings,
        environment={k: environment[k] for k in sorted(environment) if k in MEMORY_ENVIRONMENT},
    )


MEMORY_ENVIRONMENT = frozenset(
    {
        "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS",
        "VLLM_USE_FLASHINFER_SAMPLER",
        "VLLM_CPU_KVCACHE_SPACE",
    }
)
"""Variables that change the KV cache vLLM sizes for the same engine arguments."""
