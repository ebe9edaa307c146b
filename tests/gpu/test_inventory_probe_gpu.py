"""The inventory probe on a real NVIDIA GPU: NVML and the nvidia-smi fallback agree, the
memory admission plans with is what CUDA gives the engine, and the probed model maps onto a
built-in profile admission can plan with."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.inventory.local_probe import probe_this_node, read_nvidia_smi
from cluster.inventory.nvml_reader import read_nvml
from cluster.inventory.overrides import apply_overrides
from cluster.inventory.policy_inventory import policy_inventory, profile_for
from cluster.inventory.records import GpuFactSource
from domain.deployment_config import AcceleratorConfig

pytestmark = pytest.mark.gpu


def test_nvml_reports_every_gpu_with_its_model_and_memory() -> None:
    pytest.importorskip("pynvml", reason="nvidia-ml-py is part of the gpu extra")
    facts = read_nvml()
    assert facts.source is GpuFactSource.NVML
    assert facts.devices
    for device in facts.devices:
        assert device.model.strip()
        assert device.memory_bytes > 8 * 2**30
    if len(facts.devices) == 1:
        assert facts.interconnect is None


def test_nvidia_smi_fallback_agrees_with_nvml() -> None:
    pytest.importorskip("pynvml", reason="nvidia-ml-py is part of the gpu extra")
    nvml = read_nvml()
    smi = read_nvidia_smi()
    assert [d.model for d in smi.devices] == [d.model for d in nvml.devices]
    for a, b in zip(smi.devices, nvml.devices, strict=True):
        # nvidia-smi rounds to MiB.
        assert abs(a.memory_bytes - b.memory_bytes) < 2**20
    if len(nvml.devices) > 1 and nvml.interconnect is not None:
        assert smi.interconnect is nvml.interconnect


def test_the_probed_node_becomes_a_plannable_gpu_inventory(tmp_path: Path) -> None:
    probe = probe_this_node(
        node_id="f" * 20, node_ip="127.0.0.1", cache_dir=str(tmp_path), standin_slots=0
    )
    assert probe.gpus.source in (GpuFactSource.NVML, GpuFactSource.NVIDIA_SMI)
    facts = apply_overrides(probe, (), standin_memory_gib=4.0)
    assert facts.accelerator == "gpu"
    profile = profile_for(facts)
    assert profile.memory_bytes == facts.gpu_memory_bytes
    available = {facts.node_id: {"GPU": float(facts.gpu_count)}}
    inventory = policy_inventory([facts], available, AcceleratorConfig(kind="gpu"))
    assert inventory.nodes[0].gpus == len(probe.gpus.devices)


def test_the_memory_planned_with_is_what_cuda_gives_the_engine() -> None:
    """vLLM budgets `gpu_memory_utilization` of `torch.cuda.mem_get_info()`'s total: the
    probe reads the same figure (`cuDeviceTotalMem`), below NVML's by the driver's reserve."""
    pytest.importorskip("pynvml", reason="nvidia-ml-py is part of the gpu extra")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    facts = read_nvml()
    first = facts.devices[0]
    assert first.cuda_memory_bytes is not None
    assert first.cuda_memory_bytes < first.memory_bytes
    totals = {torch.cuda.mem_get_info(i)[1] for i in range(torch.cuda.device_count())}
    assert first.cuda_memory_bytes in totals
