"""vLLM engines for the GPU tests, built as Switchyard's deploys build them.

A deploy goes `ModelDeploymentConfig` -> `llm_config_kwargs` -> Ray Serve LLM's `LLMConfig`
-> its engine config's initialization kwargs -> `AsyncEngineArgs` -> vLLM's `AsyncLLM`
(`ray/llm/_internal/serve/engines/vllm/vllm_engine.py`). `engine_args` takes that path up to
`AsyncEngineArgs`, so the tests run the arguments the product runs (the async engine's, not
`vllm.LLM`'s `EngineArgs`, which lacks `enable_log_requests`, for one), and a unit test
(tests/unit/engine/test_gpu_engine_args.py) builds each of them without a GPU.

`ProductEngine` drives one `AsyncLLM` from a synchronous test through an event loop of its
own. On a GPU, Ray Serve LLM runs vLLM's Ray executor: the engine starts a local Ray (or joins
`RAY_ADDRESS`) for its workers, as it would inside a replica.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from domain.deployment_config import ModelDeploymentConfig, PlannedPlacement
from domain.fleet_file import FleetModelEntry
from serve_apps.engine.model_app import llm_config_kwargs

T = TypeVar("T")

SLEEP_UTILIZATION = 0.3
"""Each sleep-mode test engine's share of the GPU: two fit, one awake and one asleep."""


def sleep_mode_config(name: str) -> ModelDeploymentConfig:
    """The Llama miniature as a `park_mode: sleep` fleet entry deploys it."""
    entry = FleetModelEntry.model_validate(
        {"name": name, "source": "miniature:llama", "park_mode": "sleep"}
    )
    return entry.with_park_engine(
        ModelDeploymentConfig.model_validate(
            {
                "name": name,
                "source": "miniature:llama",
                "accelerator": {"kind": "gpu"},
                "engine": {"max_model_len": 512, "gpu_memory_utilization": SLEEP_UTILIZATION},
            }
        )
    )


def dcp_config() -> ModelDeploymentConfig:
    """The Kimi-K2.5 miniature (MLA) at TP2 x DCP2."""
    return ModelDeploymentConfig.model_validate(
        {
            "name": "kimi-dcp",
            "source": "miniature:kimi-k2.5",
            "layout": {"tp": 2, "dcp": 2},
            "accelerator": {"kind": "gpu"},
            "engine": {"max_model_len": 2048, "gpu_memory_utilization": 0.5},
        }
    )


def pipeline_config(first: str, second: str) -> ModelDeploymentConfig:
    """The Llama miniature at TP1 x PP2, its stages pinned as admission would pin them."""
    return ModelDeploymentConfig.model_validate(
        {
            "name": "llama-pp2",
            "source": "miniature:llama",
            "layout": {"pp": 2},
            "accelerator": {"kind": "gpu"},
            "engine": {"max_model_len": 512, "gpu_memory_utilization": 0.3},
        }
    ).model_copy(update={"placement": PlannedPlacement(rank_nodes=(first, second))})


def gpu_test_configs() -> dict[str, ModelDeploymentConfig]:
    """Every engine a GPU test starts, by name."""
    return {
        "sleeper": sleep_mode_config("sleeper"),
        "neighbour": sleep_mode_config("neighbour"),
        "kimi-dcp": dcp_config(),
        "llama-pp2": pipeline_config("a" * 56, "b" * 56),
    }


def engine_kwargs(config: ModelDeploymentConfig, model_dir: Path) -> dict[str, Any]:
    """The keyword arguments Ray Serve LLM gives `AsyncEngineArgs` for `config`."""
    from ray.serve.llm import LLMConfig

    llm_config = LLMConfig(**llm_config_kwargs(config, model_dir))
    engine_config = llm_config.get_engine_config()
    assert engine_config is not None
    kwargs: dict[str, Any] = engine_config.get_initialization_kwargs()
    return kwargs


def engine_args(config: ModelDeploymentConfig, model_dir: Path) -> Any:
    """vLLM's `AsyncEngineArgs` for `config`, as the product's replica builds them."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    return AsyncEngineArgs(**engine_kwargs(config, model_dir))


class ProductEngine:
    """One `AsyncLLM` built from `engine_args`, driven synchronously."""

    def __init__(self, config: ModelDeploymentConfig, model_dir: Path) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.config = config
        self.engine: Any = self._run(self._start(engine_args(config, model_dir)))

    @staticmethod
    async def _start(args: Any) -> Any:
        """As Ray Serve LLM's `VLLMEngine` starts it: the engine config made where a GPU is
        visible, the replica's placement group handed to vLLM's Ray executor."""
        from ray.util import get_current_placement_group
        from vllm.v1.engine.async_llm import AsyncLLM
        from vllm.v1.executor.abstract import Executor

        group = get_current_placement_group()
        vllm_config = _engine_config(args) if group is None else _engine_config_in(group, args)
        vllm_config.parallel_config.placement_group = group
        return AsyncLLM(
            vllm_config=vllm_config,
            executor_class=Executor.get_class(vllm_config),
            log_requests=args.enable_log_requests,
            log_stats=not args.disable_log_stats,
        )

    def _run(self, coroutine: Coroutine[Any, Any, T], timeout_s: float = 600) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout_s)

    def tokens(self, prompt: str = "hello", max_tokens: int = 8) -> int:
        """Generate `max_tokens` (EOS ignored); how many came."""
        from vllm import SamplingParams

        async def generate() -> int:
            params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
            last: Any = None
            async for out in self.engine.generate(prompt, params, str(uuid.uuid4())):
                last = out
            return len(last.outputs[0].token_ids) if last is not None else 0

        return self._run(generate())

    def sleep(self, level: int = 1) -> None:
        self._run(self.engine.sleep(level))

    def wake_up(self) -> None:
        self._run(self.engine.wake_up())

    def shutdown(self) -> None:
        try:
            self.engine.shutdown()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)


def _engine_config(args: Any) -> Any:
    from vllm.usage.usage_lib import UsageContext

    return args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)


def _engine_config_in(group: Any, args: Any) -> Any:
    """The engine config made by a task on the group's first GPU: a replica actor holds no
    GPU of its own (Ray Serve LLM's `_prepare_engine_config` does the same)."""
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    task = ray.remote(_engine_config).options(
        num_cpus=0,
        num_gpus=1,
        scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=group),
    )
    return ray.get(task.remote(args))
