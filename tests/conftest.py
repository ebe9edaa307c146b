"""Suite-wide wiring: each tier's marker follows from its folder, so `-m unit` etc. select tiers.

GPU tests are skipped, with the reason, where no NVIDIA GPU is visible.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

_TIERS = ("unit", "integration", "e2e", "faults", "gpu")


def _has_nvidia_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests_root = Path(__file__).parent
    gpu_present: bool | None = None
    for item in items:
        try:
            tier = Path(item.path).relative_to(tests_root).parts[0]
        except ValueError:
            continue
        if tier in _TIERS:
            item.add_marker(getattr(pytest.mark, tier))
        if item.get_closest_marker("gpu") is not None:
            if gpu_present is None:
                gpu_present = _has_nvidia_gpu()
            if not gpu_present:
                item.add_marker(
                    pytest.mark.skip(reason="needs an NVIDIA GPU (nvidia-smi -L lists none)")
                )
