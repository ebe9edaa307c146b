"""Builder for one model's Ray Serve application, on top of Ray Serve LLM's public pieces.

We use `ray.serve.llm.LLMConfig` + `build_llm_deployment` (its `LLMServer` wraps vLLM's
AsyncLLM, health checks, engine metrics and placement) and add only what Switchyard owns:
the layout -> engine args and placement mapping, the CPU stand-in, and naming. This module
is the only place that builds a Serve application for a model.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from domain.app_name import AppName
from domain.deployment_config import ModelDeploymentConfig
from serve_apps.engine.placement_bundles import placement_for
from serve_apps.engine.weights_locator import WeightsLocator

if TYPE_CHECKING:
    from ray.serve.deployment import Application


def engine_kwargs_for(config: ModelDeploymentConfig) -> dict[str, Any]:
    """vLLM engine arguments for a deployment (pure; unit-tested)."""
    layout, engine = config.layout, config.engine
    kwargs: dict[str, Any] = {
        "tensor_parallel_size": layout.tp,
        "pipeline_parallel_size": layout.pp,
        "kv_cache_dtype": engine.kv_cache_dtype,
        "dtype": engine.dtype,
        "enforce_eager": engine.enforce_eager,
        # The gateway records per-request metrics; vLLM's per-request log lines would
        # cost CPU on every request, so keep only its periodic stats.
        "enable_log_requests": False,
    }
    if engine.max_model_len is not None:
        kwargs["max_model_len"] = engine.max_model_len
    if layout.ep:
        kwargs["enable_expert_parallel"] = True
    if layout.dcp > 1:
        kwargs["decode_context_parallel_size"] = layout.dcp
    if config.accelerator.kind == "gpu":
        kwargs["gpu_memory_utilization"] = engine.gpu_memory_utilization
    elif layout.gpus_per_replica > 1:
        # The CPU platform refuses vLLM's Ray executor; its multiprocessing executor
        # runs the TP/PP ranks as processes inside the replica's placement group.
        kwargs["distributed_executor_backend"] = "mp"
    # The typed settings that are set (recipe and file), then `extra`, which may override.
    kwargs.update(engine.engine_kwargs())
    return kwargs


def engine_env_for(config: ModelDeploymentConfig) -> dict[str, str]:
    """Environment for the replica and its engine processes."""
    env: dict[str, str] = {}
    if config.accelerator.kind == "cpu":
        env["VLLM_CPU_KVCACHE_SPACE"] = f"{config.accelerator.cpu_kv_cache_space_gib:g}"
        bind = config.accelerator.cpu_threads_bind
        if bind == "auto" and config.layout.gpus_per_replica > 1:
            # One core per rank; "auto" would bind every rank to the whole NUMA node.
            bind = "|".join(str(i) for i in range(config.layout.gpus_per_replica))
        env["VLLM_CPU_OMP_THREADS_BIND"] = bind
    return env


def llm_config_kwargs(config: ModelDeploymentConfig, model_path: Path) -> dict[str, Any]:
    """Arguments for `ray.serve.llm.LLMConfig` (pure; unit-tested without Ray)."""
    placement = placement_for(config.layout, config.accelerator, planned=config.placement)
    # `replicas` are independent engines, one Serve replica each (layout.dp, vLLM data
    # parallel, is refused by the config until the deployer runs DP engine groups).
    num_replicas = config.replicas
    return {
        "model_loading_config": {"model_id": config.name, "model_source": str(model_path)},
        "engine_kwargs": engine_kwargs_for(config),
        "placement_group_config": placement.as_ray_serve_llm(),
        "runtime_env": {"env_vars": engine_env_for(config)},
        "deployment_config": {
            "num_replicas": num_replicas,
            "health_check_period_s": config.health_check_period_s,
            "health_check_timeout_s": config.health_check_timeout_s,
            "graceful_shutdown_timeout_s": 30,
            # A replica being removed first sleeps one wait loop (Serve's default 2 s)
            # before it counts its requests, even when idle. A swap drains OLD in the
            # gateways first, so that sleep was pure unavailability in `removing_old`
            # (the swap-time benchmark suite); in-flight requests are still waited for.
            "graceful_shutdown_wait_loop_s": 0.2,
            # The nodes and GPU kind admission planned (per bundle; none: Ray chooses).
            **placement.serve_deployment_options(),
        },
        # The gateway streams each chunk as it comes: Ray Serve LLM's default 50 ms
        # batching would add up to 50 ms to time-to-first-token.
        "experimental_configs": {"stream_batching_interval_ms": 0},
        "log_engine_metrics": True,
    }


def build_model_app(
    app: AppName,
    config: ModelDeploymentConfig,
    model_path: Path,
    weights: WeightsLocator | None = None,
) -> Application:
    """The Serve application `app` for one model (its only deployment is an LLMServer).

    `weights`: how each replica finds the weights on its own node; without it every replica
    loads `model_path` (the manager's path)."""
    from ray.serve.llm import LLMConfig, build_llm_deployment

    from serve_apps.engine.vllm_replica import DirectStreamingLLMServer

    llm_config = LLMConfig(**llm_config_kwargs(config, model_path))
    return build_llm_deployment(
        llm_config,
        name_prefix=f"{app.app}:",
        # Ray Serve LLM's stubs type this as its own LLMServer, which this class extends.
        deployment_cls=cast(Any, DirectStreamingLLMServer),
        bind_kwargs={"weights": weights} if weights is not None else None,
    )
