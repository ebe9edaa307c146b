"""Typed records of one node's hardware, as probed and as finally used for admission."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from policies.inventory import Interconnect


class GpuFactSource(StrEnum):
    """Where a node's accelerator facts came from (the first that answered wins)."""

    NVML = "nvml"
    NVIDIA_SMI = "nvidia-smi"
    DECLARED = "declared"
    """No GPU seen: the CPU stand-in slots the node declares as a Ray resource."""
    NONE = "none"

    @property
    def sees_gpus(self) -> bool:
        """The GPUs themselves answered (the other sources are Ray's or the stand-in's word)."""
        return self in (GpuFactSource.NVML, GpuFactSource.NVIDIA_SMI)


@dataclass(frozen=True)
class GpuDevice:
    index: int
    model: str
    """The driver's product name, e.g. "NVIDIA H200"."""
    memory_bytes: int
    """The total NVML (or nvidia-smi) reports."""
    cuda_memory_bytes: int | None = None
    """The total CUDA gives a process on this device (`cuDeviceTotalMem`, what vLLM budgets
    `gpu_memory_utilization` of): NVML's less what the driver reserves; None when the CUDA
    driver library could not be asked."""

    @property
    def usable_bytes(self) -> int:
        """What an engine can budget: CUDA's figure, else NVML's less the driver's reserve
        (an estimate, `DRIVER_RESERVE_FRACTION`)."""
        if self.cuda_memory_bytes is not None:
            return self.cuda_memory_bytes
        return int(self.memory_bytes * (1 - DRIVER_RESERVE_FRACTION))


DRIVER_RESERVE_FRACTION = 0.0065
"""What CUDA's total falls short of NVML's, where CUDA could not be asked: an estimate from two
pairs (an RTX PRO 6000: NVML 97,887 MiB, CUDA 638 MiB less; an H100 80GB HBM3: NVML 81,559 MiB,
CUDA about 470 MiB less). It takes 636 and 530 MiB off them: within 3 MiB of the first and
60 MiB on the safe side of the second (docs/inventory.md)."""


@dataclass(frozen=True)
class GpuFacts:
    """What NVML or nvidia-smi told about a node's GPUs."""

    devices: tuple[GpuDevice, ...]
    interconnect: Interconnect | None
    """NVLINK when every pair of GPUs is joined by NVLink, PCIE otherwise; None with one GPU
    or when the links could not be read."""
    source: GpuFactSource
    p2p_ok: bool | None = None
    """Whether every pair can read each other's memory peer-to-peer (NVML only)."""


@dataclass(frozen=True)
class NodeProbe:
    """One node as its probe task saw it, before any operator override."""

    node_id: str
    node_ip: str
    hostname: str
    gpus: GpuFacts
    standin_slots: int
    """CPU stand-in accelerator slots the node declares (0 on GPU nodes or when none)."""
    cache_dir: str
    disk_free_bytes: int | None
    host_ram_bytes: int | None
    labels: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    """Why a probe step gave nothing (NVML missing, nvidia-smi failed, ...)."""
    cpu_amx_tiles: bool = False
    """The CPU has Intel AMX tiles (/proc/cpuinfo `amx_tile`): vLLM's CPU engine picks its
    AMX kernels, and their KV block size, there."""
    ray_gpus: int | None = None
    """The `GPU`s Ray's raylet on this node declares (None: not asked)."""
    ray_accelerator_type: str | None = None
    """Ray's kind of them (its `accelerator_type:` resource), if any."""


@dataclass(frozen=True)
class NodeFacts:
    """One node's values after overrides: what admission plans with and `status` shows."""

    node_id: str
    node_ip: str
    hostname: str
    accelerator: str
    """"gpu" or "standin"."""
    gpu_model: str
    gpu_count: int
    gpu_memory_bytes: int
    interconnect: Interconnect | None
    disk_free_bytes: int | None
    host_ram_bytes: int | None
    cache_dir: str
    source: GpuFactSource
    overridden: tuple[str, ...] = ()
    """Names of the fields an operator override set."""
    notes: tuple[str, ...] = field(default=())
    cpu_amx_tiles: bool = False
    """As probed (NodeProbe.cpu_amx_tiles)."""
    ray_gpus: int | None = None
    """The `GPU`s Ray declares on the node (NodeProbe.ray_gpus)."""
    probed_gpus: int = 0
    """The GPUs NVML (or nvidia-smi) saw; `gpu_count` is Ray's where the two differ."""
    ray_accelerator_type: str | None = None
    """Ray's kind of the node's GPUs (its `accelerator_type:` resource and
    `ray.io/accelerator-type` label, "H100"); None where Ray gives none."""

    @property
    def name(self) -> str:
        """The name admission and placement use for the node (Ray node id, first 12)."""
        return self.node_id[:12]

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.name,
            "node_id": self.node_id,
            "node_ip": self.node_ip,
            "hostname": self.hostname,
            "accelerator": self.accelerator,
            "gpu_model": self.gpu_model,
            "gpu_count": self.gpu_count,
            "gpu_count_ray": self.ray_gpus,
            "gpu_count_nvml": self.probed_gpus if self.source.sees_gpus else None,
            "ray_accelerator_type": self.ray_accelerator_type,
            "gpu_memory_bytes": self.gpu_memory_bytes,
            "interconnect": None if self.interconnect is None else self.interconnect.value,
            "disk_free_bytes": self.disk_free_bytes,
            "host_ram_bytes": self.host_ram_bytes,
            "cache_dir": self.cache_dir,
            "source": self.source.value,
            "overridden": list(self.overridden),
            "notes": list(self.notes),
            "cpu_amx_tiles": self.cpu_amx_tiles,
        }


@dataclass(frozen=True)
class ProbedCluster:
    """Every alive node's facts after overrides, with what Ray still has free."""

    facts: tuple[NodeFacts, ...]
    available: dict[str, dict[str, float]]
    """Ray's available resources per full node id, read right after the probes."""
    problems: tuple[str, ...]
    """Nodes whose probe failed, overrides that matched no node, and GPU counts Ray and the
    probe disagree on (`overrides.gpu_count_warnings`)."""
    totals: dict[str, dict[str, float]] = field(default_factory=dict)
    """Ray's total resources per full node id (what is in use: totals less available)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": [f.to_json() for f in self.facts],
            "problems": list(self.problems),
        }
