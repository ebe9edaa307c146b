"""vLLM's sleep mode on a real GPU, as `park_mode: sleep` uses it (docs/sleep-mode.md): what a
sleeping engine leaves on the GPU, a wake against the same engine's cold start, and a second
engine starting and serving beside a sleeping one on the same GPU.

The engines are configured as Switchyard configures them (`engine_kwargs_for`, with
`enable_sleep_mode` from the fleet entry) on the Llama miniature. Memory is read device-wide
(`torch.cuda.mem_get_info`), since vLLM's engine core runs in a process of its own.

Needs one NVIDIA GPU and vLLM's CUDA build (`make setup-gpu`); skipped otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.miniature_generator import write_miniature
from domain.deployment_config import ModelDeploymentConfig
from domain.fleet_file import FleetModelEntry
from serve_apps.engine.model_app import engine_kwargs_for

pytestmark = pytest.mark.gpu

GIB = 1024**3
UTILIZATION = 0.3
"""Each engine's share of the GPU: two fit, one awake and one asleep."""


def _used_bytes() -> int:
    import torch

    free, total = torch.cuda.mem_get_info()
    return int(total - free)


@pytest.fixture(scope="module")
def vllm_module() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    return pytest.importorskip("vllm")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_miniature("llama", tmp_path_factory.mktemp("llama"))


def _engine(vllm: Any, model_dir: Path, name: str) -> Any:
    """An engine as a `park_mode: sleep` entry deploys it."""
    entry = FleetModelEntry.model_validate(
        {"name": name, "source": "miniature:llama", "park_mode": "sleep"}
    )
    config = entry.with_park_engine(
        ModelDeploymentConfig.model_validate(
            {
                "name": name,
                "source": "miniature:llama",
                "accelerator": {"kind": "gpu"},
                "engine": {"max_model_len": 512, "gpu_memory_utilization": UTILIZATION},
            }
        )
    )
    kwargs = engine_kwargs_for(config)
    assert kwargs["enable_sleep_mode"] is True
    return vllm.LLM(model=str(model_dir), **kwargs)


def _answers(vllm: Any, llm: Any) -> bool:
    out = llm.generate(["hello"], vllm.SamplingParams(max_tokens=8, ignore_eos=True))
    return len(out[0].outputs[0].token_ids) == 8


@pytest.fixture
def engine(vllm_module: Any, model_dir: Path) -> Iterator[tuple[Any, float, int]]:
    """One engine, with its cold start's seconds and the device's use before it."""
    before = _used_bytes()
    started = time.monotonic()
    llm = _engine(vllm_module, model_dir, "sleeper")
    cold_s = time.monotonic() - started
    yield llm, cold_s, before
    del llm


def test_a_sleeping_engine_gives_back_its_weights_and_kv_cache(
    vllm_module: Any, engine: tuple[Any, float, int]
) -> None:
    llm, _, before = engine
    awake = _used_bytes() - before
    llm.sleep(level=1)
    residue = _used_bytes() - before
    # What stays: its CUDA context, NCCL buffers and CUDA graphs (docs/sleep-mode.md).
    assert residue < 0.2 * awake, (residue / GIB, awake / GIB)
    llm.wake_up()
    assert _answers(vllm_module, llm)


def test_a_wake_is_a_fraction_of_the_same_engines_cold_start(
    vllm_module: Any, engine: tuple[Any, float, int]
) -> None:
    llm, cold_s, _ = engine
    llm.sleep(level=1)
    started = time.monotonic()
    llm.wake_up()
    wake_s = time.monotonic() - started
    assert wake_s < cold_s / 3, (wake_s, cold_s)
    assert _answers(vllm_module, llm)


def test_a_second_engine_starts_and_serves_beside_a_sleeping_one(
    vllm_module: Any, model_dir: Path, engine: tuple[Any, float, int]
) -> None:
    first, _, _ = engine
    first.sleep(level=1)
    # vLLM's start-up check passes beside the sleeper's residue: the GPU holds both.
    second = _engine(vllm_module, model_dir, "neighbour")
    assert _answers(vllm_module, second)
    second.sleep(level=1)
    first.wake_up()
    assert _answers(vllm_module, first)
