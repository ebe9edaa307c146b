"""The names NVML prints for a GPU find its built-in profile: a node probed with one of them
is planned with the right memory, bandwidth, compute capability and fp8 support, not as an
unknown GPU."""

from __future__ import annotations

import pytest

from policies.inventory import Interconnect, gpu_profile
from policies.units import MIB

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("nvml_name", "profile", "capability", "fp8"),
    [
        ("NVIDIA H100 80GB HBM3", "h100", (9, 0), True),
        ("NVIDIA H100 PCIe", "h100-pcie", (9, 0), True),
        ("NVIDIA H100 NVL", "h100-nvl", (9, 0), True),
        ("NVIDIA H200", "h200", (9, 0), True),
        ("NVIDIA H200 NVL", "h200-nvl", (9, 0), True),
        ("NVIDIA A100-SXM4-80GB", "a100-80g", (8, 0), False),
        ("NVIDIA L40S", "l40s", (8, 9), True),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000-blackwell", (12, 0), True),
        (
            "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
            "rtx-pro-6000-blackwell",
            (12, 0),
            True,
        ),
        (
            "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
            "rtx-pro-6000-blackwell-max-q",
            (12, 0),
            True,
        ),
        ("NVIDIA B200", "b200", (10, 0), True),
    ],
)
def test_each_name_nvml_prints_has_its_profile(
    nvml_name: str, profile: str, capability: tuple[int, int], fp8: bool
) -> None:
    found = gpu_profile(nvml_name)
    assert found.name == profile
    assert found.compute_capability == capability
    assert found.native_fp8 is fp8
    assert found.datasheet.startswith("https://")


def test_the_pcie_cards_are_planned_on_pcie_and_their_memory_is_their_own() -> None:
    for name in ("h100-pcie", "h100-nvl", "h200-nvl"):
        assert gpu_profile(name).interconnect is Interconnect.PCIE
    assert gpu_profile("NVIDIA H100 NVL").memory_bytes == 95_830 * MIB
    assert (
        gpu_profile("NVIDIA H100 PCIe").hbm_bandwidth_gbps < gpu_profile("h100").hbm_bandwidth_gbps
    )
    max_q, full = gpu_profile("rtx-pro-6000-max-q"), gpu_profile("rtx-pro-6000")
    assert max_q.memory_bytes == full.memory_bytes
    assert max_q.fp4_tflops < full.fp4_tflops
