"""Suite-wide wiring: each tier's marker follows from its folder, so `-m unit` etc. select tiers.

GPU tests are skipped, with the reason, where no NVIDIA GPU is visible.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_TIERS = ("unit", "integration", "e2e", "faults", "gpu")


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
                from cluster.node_probe.gpu_presence import has_nvidia_gpu

                gpu_present = has_nvidia_gpu()
            if not gpu_present:
                item.add_marker(
                    pytest.mark.skip(
                        reason="needs an NVIDIA GPU (neither NVML nor nvidia-smi sees one)"
                    )
                )
