"""The GPU tier (`make gpu-test`): what each test needs, and the local Ray its engines join.

Every test here runs alone on one NVIDIA GPU with vLLM's CUDA build, or is skipped naming
what it needs more (GPUs, nodes). Their engines are built as the product builds them
(product_engine.py): vLLM's Ray executor, so a Ray cluster is started for them once (the
machine's GPUs as Ray counts them) unless `RAY_ADDRESS` names one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.miniature_generator import write_miniature

GIVEN_RAY_ADDRESS = os.environ.get("RAY_ADDRESS")
"""The cluster named before the suite ran (`ray_for_engines` sets the variable itself)."""


def gpu_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


@pytest.fixture(scope="session")
def cuda_vllm() -> Any:
    """vLLM's CUDA build on a machine with a GPU; the test is skipped otherwise."""
    if gpu_count() < 1:
        pytest.skip("needs an NVIDIA GPU (torch sees none)")
    vllm = pytest.importorskip("vllm", reason="needs vLLM's CUDA build (make setup on a GPU box)")
    return vllm


@pytest.fixture(scope="session")
def ray_for_engines(cuda_vllm: Any) -> Iterator[str]:
    """The Ray cluster the engines' Ray executor joins: `RAY_ADDRESS`, or one started here
    with this machine's GPUs (the engine core processes find it through RAY_ADDRESS)."""
    import ray

    ray.init(address=GIVEN_RAY_ADDRESS or None, include_dashboard=False, ignore_reinit_error=True)
    address = str(ray.get_runtime_context().gcs_address)
    previous = os.environ.get("RAY_ADDRESS")
    os.environ["RAY_ADDRESS"] = address
    try:
        yield address
    finally:
        ray.shutdown()
        if previous is None:
            os.environ.pop("RAY_ADDRESS", None)
        else:
            os.environ["RAY_ADDRESS"] = previous


@pytest.fixture(scope="session")
def llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_miniature("llama", tmp_path_factory.mktemp("llama"))
