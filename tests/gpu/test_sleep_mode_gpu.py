"""vLLM's sleep mode on a real GPU, as `park_mode: sleep` configures it (docs/sleep-mode.md):
what a sleeping engine leaves on the GPU, a wake against the same engine's cold start, and a
second engine starting and serving beside a sleeping one on the same GPU.

The engines are the product's (product_engine.py: a `park_mode: sleep` entry's config through
Ray Serve LLM's engine arguments) on the Llama miniature. Memory is read device-wide
(`torch.cuda.mem_get_info`): vLLM's workers run in processes of their own. Two engines share
the one GPU as the fractional placement of docs/sleep-mode.md will place them: each Ray worker
asks half a GPU (`VLLM_RAY_PER_WORKER_GPUS=0.5`, what Ray Serve LLM sets for half-GPU
bundles).

Needs one NVIDIA GPU and vLLM's CUDA build (`make setup` on a GPU machine); skipped otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.gpu.product_engine import ProductEngine, sleep_mode_config

pytestmark = pytest.mark.gpu

GIB = 1024**3


def _used_bytes() -> int:
    import torch

    free, total = torch.cuda.mem_get_info()
    return int(total - free)


@pytest.fixture(scope="module")
def half_gpu_workers() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VLLM_RAY_PER_WORKER_GPUS", "0.5")
        yield


@pytest.fixture
def engine(
    ray_for_engines: str, half_gpu_workers: None, llama_dir: Path
) -> Iterator[tuple[ProductEngine, float, int]]:
    """One engine, with its cold start's seconds and the device's use before it."""
    before = _used_bytes()
    started = time.monotonic()
    llm = ProductEngine(sleep_mode_config("sleeper"), llama_dir)
    cold_s = time.monotonic() - started
    assert llm.config.engine.enable_sleep_mode is True
    try:
        yield llm, cold_s, before
    finally:
        llm.shutdown()


def test_a_sleeping_engine_gives_back_its_weights_and_kv_cache(
    engine: tuple[ProductEngine, float, int],
) -> None:
    llm, _, before = engine
    assert llm.tokens() == 8
    awake = _used_bytes() - before
    llm.sleep(level=1)
    residue = _used_bytes() - before
    # What stays: its CUDA context, NCCL buffers and CUDA graphs (docs/sleep-mode.md).
    assert residue < 0.2 * awake, (residue / GIB, awake / GIB)
    llm.wake_up()
    assert llm.tokens() == 8


def test_a_wake_is_a_fraction_of_the_same_engines_cold_start(
    engine: tuple[ProductEngine, float, int],
) -> None:
    llm, cold_s, _ = engine
    llm.sleep(level=1)
    started = time.monotonic()
    llm.wake_up()
    wake_s = time.monotonic() - started
    assert wake_s < cold_s / 3, (wake_s, cold_s)
    assert llm.tokens() == 8


def test_a_second_engine_starts_and_serves_beside_a_sleeping_one(
    engine: tuple[ProductEngine, float, int], llama_dir: Path, cuda_vllm: Any
) -> None:
    first, _, _ = engine
    first.sleep(level=1)
    # vLLM's start-up check passes beside the sleeper's residue: the GPU holds both.
    second = ProductEngine(sleep_mode_config("neighbour"), llama_dir)
    try:
        assert second.tokens() == 8
        second.sleep(level=1)
        first.wake_up()
        assert first.tokens() == 8
    finally:
        second.shutdown()
