"""has_nvidia_gpu: NVML first, then nvidia-smi; no GPU when neither answers."""

from __future__ import annotations

import pytest

from cluster.inventory import local_probe
from cluster.inventory.gpu_presence import has_nvidia_gpu
from cluster.inventory.nvml_reader import NvmlUnavailable
from cluster.inventory.records import GpuDevice, GpuFacts, GpuFactSource

_ONE_GPU = (GpuDevice(0, "NVIDIA H200", 141 * 1024**3),)


def _nvml_missing() -> GpuFacts:
    raise NvmlUnavailable("the pynvml module (nvidia-ml-py) is not installed")


def _smi_missing() -> GpuFacts:
    raise FileNotFoundError("nvidia-smi is not on PATH")


def test_no_gpu_when_neither_nvml_nor_nvidia_smi_answers(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(local_probe, "read_nvml", _nvml_missing)
    monkeypatch.setattr(local_probe, "read_nvidia_smi", _smi_missing)
    assert not has_nvidia_gpu()


def test_nvml_answers_first(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(
        local_probe, "read_nvml", lambda: GpuFacts(_ONE_GPU, None, GpuFactSource.NVML)
    )
    monkeypatch.setattr(local_probe, "read_nvidia_smi", _smi_missing)
    assert has_nvidia_gpu()


def test_nvidia_smi_answers_where_nvml_cannot_be_loaded(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(local_probe, "read_nvml", _nvml_missing)
    monkeypatch.setattr(
        local_probe, "read_nvidia_smi", lambda: GpuFacts(_ONE_GPU, None, GpuFactSource.NVIDIA_SMI)
    )
    assert has_nvidia_gpu()
