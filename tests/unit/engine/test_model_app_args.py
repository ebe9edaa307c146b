"""Layout -> vLLM engine arguments, engine environment and Ray Serve LLM config (no Ray)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from domain.deployment_config import ModelDeploymentConfig
from serve_apps.engine.model_app import engine_env_for, engine_kwargs_for, llm_config_kwargs


def _config(**fields: Any) -> ModelDeploymentConfig:
    return ModelDeploymentConfig.model_validate({"name": "m", "source": "org/m", **fields})


def _cpu(**fields: Any) -> ModelDeploymentConfig:
    return _config(accelerator={"kind": "cpu"}, **fields)


def test_cpu_tp2_uses_the_multiprocessing_executor() -> None:
    kwargs = engine_kwargs_for(_cpu(layout={"tp": 2}))
    assert kwargs["tensor_parallel_size"] == 2
    assert kwargs["pipeline_parallel_size"] == 1
    assert kwargs["distributed_executor_backend"] == "mp"
    assert "gpu_memory_utilization" not in kwargs


def test_cpu_tp2_binds_one_core_per_rank() -> None:
    env = engine_env_for(_cpu(layout={"tp": 2}))
    assert env == {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "0|1"}


def test_cpu_tp2_pp2_binds_four_cores() -> None:
    env = engine_env_for(_cpu(layout={"tp": 2, "pp": 2}))
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0|1|2|3"


def test_cpu_single_rank_keeps_auto_binding_and_the_default_executor() -> None:
    config = _cpu()
    assert "distributed_executor_backend" not in engine_kwargs_for(config)
    assert engine_env_for(config)["VLLM_CPU_OMP_THREADS_BIND"] == "auto"


def test_cpu_explicit_binding_and_kv_space_are_kept() -> None:
    config = _config(
        layout={"tp": 2},
        accelerator={"kind": "cpu", "cpu_threads_bind": "nobind", "cpu_kv_cache_space_gib": 2.5},
    )
    assert engine_env_for(config) == {
        "VLLM_CPU_KVCACHE_SPACE": "2.5",
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    }


def test_gpu_sets_memory_utilization_and_leaves_the_executor_to_ray() -> None:
    config = _config(layout={"tp": 4}, engine={"gpu_memory_utilization": 0.85})
    kwargs = engine_kwargs_for(config)
    assert kwargs["gpu_memory_utilization"] == 0.85
    assert kwargs["tensor_parallel_size"] == 4
    assert "distributed_executor_backend" not in kwargs
    assert engine_env_for(config) == {}


def test_engine_fields_are_passed_and_per_request_logs_are_off() -> None:
    config = _config(
        engine={
            "max_model_len": 4096,
            "kv_cache_dtype": "fp8",
            "dtype": "bfloat16",
            "enforce_eager": True,
        }
    )
    kwargs = engine_kwargs_for(config)
    assert kwargs["max_model_len"] == 4096
    assert kwargs["kv_cache_dtype"] == "fp8"
    assert kwargs["dtype"] == "bfloat16"
    assert kwargs["enforce_eager"] is True
    assert kwargs["enable_log_requests"] is False


def test_max_model_len_and_expert_parallel_are_absent_unless_asked_for() -> None:
    kwargs = engine_kwargs_for(_config())
    assert "max_model_len" not in kwargs
    assert "enable_expert_parallel" not in kwargs
    assert engine_kwargs_for(_config(layout={"tp": 2, "ep": True}))["enable_expert_parallel"]


def test_typed_engine_settings_and_extra_reach_vllm() -> None:
    config = _config(
        engine={
            "max_num_seqs": 8,
            "tool_call_parser": "kimi_k2",
            "enable_prefix_caching": False,
            "extra": {"block_size": 32},
        }
    )
    kwargs = engine_kwargs_for(config)
    assert kwargs["max_num_seqs"] == 8
    assert kwargs["tool_call_parser"] == "kimi_k2"
    assert kwargs["enable_prefix_caching"] is False
    assert kwargs["block_size"] == 32


def test_unset_engine_settings_are_left_to_vllm() -> None:
    kwargs = engine_kwargs_for(_config())
    for name in ("max_num_seqs", "tool_call_parser", "trust_remote_code", "speculative_config"):
        assert name not in kwargs


def test_llm_config_names_the_model_and_its_local_path() -> None:
    kwargs = llm_config_kwargs(_config(name="kimi"), Path("/cache/kimi"))
    assert kwargs["model_loading_config"] == {"model_id": "kimi", "model_source": "/cache/kimi"}


def test_replicas_are_independent_engines() -> None:
    # Changed on purpose (planner issue): dp no longer multiplies replicas; it is vLLM data
    # parallel, which the config refuses until the deployer runs DP engine groups.
    kwargs = llm_config_kwargs(_config(replicas=3), Path("/m"))
    assert kwargs["deployment_config"]["num_replicas"] == 3
    assert "data_parallel_size" not in kwargs["engine_kwargs"]


def test_decode_context_parallel_reaches_vllm() -> None:
    kwargs = llm_config_kwargs(_config(layout={"tp": 4, "dcp": 4}), Path("/m"))
    assert kwargs["engine_kwargs"]["decode_context_parallel_size"] == 4
    assert "decode_context_parallel_size" not in engine_kwargs_for(_config())


def test_stream_batching_is_off_so_chunks_are_not_delayed() -> None:
    kwargs = llm_config_kwargs(_config(), Path("/m"))
    assert kwargs["experimental_configs"] == {"stream_batching_interval_ms": 0}


def test_a_removed_replica_checks_for_requests_often_instead_of_sleeping_two_seconds() -> None:
    deployment = llm_config_kwargs(_config(), Path("/m"))["deployment_config"]
    assert deployment["graceful_shutdown_wait_loop_s"] <= 0.5
    assert deployment["graceful_shutdown_timeout_s"] >= 30  # in-flight requests may finish


def test_llm_config_carries_placement_env_and_health_checks() -> None:
    config = _config(
        layout={"tp": 2},
        accelerator={"kind": "cpu"},
        health_check_period_s=3.0,
        health_check_timeout_s=40.0,
    )
    kwargs = llm_config_kwargs(config, Path("/m"))
    assert kwargs["placement_group_config"] == {
        "bundles": [{"CPU": 1.0, "accel_slot": 1.0}] * 2,
        "strategy": "STRICT_PACK",
    }
    assert kwargs["runtime_env"] == {"env_vars": engine_env_for(config)}
    assert kwargs["engine_kwargs"] == engine_kwargs_for(config)
    deployment = kwargs["deployment_config"]
    assert deployment["health_check_period_s"] == 3.0
    assert deployment["health_check_timeout_s"] == 40.0
    assert deployment["num_replicas"] == 1
