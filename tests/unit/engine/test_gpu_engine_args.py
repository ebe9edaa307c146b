"""Every engine the GPU tests start is built as the product builds it, and vLLM takes its
arguments: checked here without a GPU, so a GPU test never fails on its first line.

The product's path (tests/gpu/product_engine.py): `llm_config_kwargs` -> Ray Serve LLM's
`LLMConfig` -> its engine config's initialization kwargs -> `AsyncEngineArgs`. The GPU tests
once passed `engine_kwargs_for` straight into `vllm.LLM`, whose `EngineArgs` has no
`enable_log_requests` (an `AsyncEngineArgs` field): every one raised TypeError.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.gpu.product_engine import engine_args, engine_kwargs, gpu_test_configs

pytestmark = pytest.mark.unit

CONFIGS = gpu_test_configs()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_each_gpu_test_engine_has_arguments_vllm_takes(name: str, tmp_path: Path) -> None:
    from vllm.engine.arg_utils import AsyncEngineArgs

    args = engine_args(CONFIGS[name], tmp_path)
    assert isinstance(args, AsyncEngineArgs)
    assert args.model == str(tmp_path)
    # Ray Serve LLM runs vLLM's Ray executor on GPUs, in the replica's placement group.
    assert args.distributed_executor_backend == "ray"


def test_the_async_engines_arguments_are_not_the_offline_llms() -> None:
    from vllm.engine.arg_utils import EngineArgs

    kwargs = engine_kwargs(CONFIGS["sleeper"], Path("/models/llama"))
    offline = {f.name for f in dataclasses.fields(EngineArgs)}
    assert "enable_log_requests" in kwargs and "enable_log_requests" not in offline
    with pytest.raises(TypeError, match="enable_log_requests"):
        EngineArgs(**kwargs)


def test_the_layouts_and_sleep_mode_reach_the_engine(tmp_path: Path) -> None:
    sleeper = engine_args(CONFIGS["sleeper"], tmp_path)
    assert sleeper.enable_sleep_mode is True
    dcp = engine_args(CONFIGS["kimi-dcp"], tmp_path)
    assert (dcp.tensor_parallel_size, dcp.decode_context_parallel_size) == (2, 2)
    pipeline = engine_args(CONFIGS["llama-pp2"], tmp_path)
    assert pipeline.pipeline_parallel_size == 2
