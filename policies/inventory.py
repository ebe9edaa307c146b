"""Typed snapshots of the hardware a model could be placed on.

Built-in GPU profiles carry the figures of the shared reference (memory as the driver
reports it, HBM bandwidth, interconnect). The manager builds `ClusterInventory` from node
probes; tests and `switchyard plan` build homogeneous ones. A CPU "stand-in" profile lets a
CPU-only node that declares N accelerator slots be planned like a GPU node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from policies.errors import InvalidInventory, UnknownGpu
from policies.units import GIB, MIB


class Interconnect(StrEnum):
    PCIE = "pcie"
    """GPUs talk over PCIe only; vLLM's custom all-reduce is off beyond two GPUs."""
    NVLINK = "nvlink"
    HOST_MEMORY = "host_memory"
    """CPU stand-in accelerators: ranks exchange data through shared host memory."""


@dataclass(frozen=True)
class GpuProfile:
    """One accelerator kind."""

    name: str
    """Canonical lower-case name, e.g. "rtx-pro-6000-blackwell"."""
    memory_bytes: int
    """Total memory as the driver reports it; vLLM budgets `gpu_memory_utilization` of this."""
    hbm_bandwidth_gbps: float
    """Memory bandwidth in GB/s (10^9 bytes per second)."""
    interconnect: Interconnect
    link_bandwidth_gbps: float
    """GPU-to-GPU bandwidth per direction in GB/s, as measured for P2P where known."""
    link_latency_us: float
    """Latency of one step of a ring collective between two GPUs of a node."""
    compute_capability: tuple[int, int] | None = None
    native_fp8: bool = False
    cuda_graphs: bool = True
    """Whether vLLM captures CUDA graphs (and so reserves memory for them) on this device."""
    aliases: tuple[str, ...] = ()
    sm_count: int = 132
    """Streaming multiprocessors (the sampler keeps one vocabulary row per SM)."""
    bf16_tflops: float = 0.0
    """Dense (no sparsity) tensor-core peak for bf16 inputs, in 10^12 FLOP/s; 0 unknown."""
    fp8_tflops: float = 0.0
    """Dense fp8 tensor-core peak; 0 where the GPU has no fp8 tensor cores."""
    fp4_tflops: float = 0.0
    """Dense fp4 tensor-core peak; 0 where the GPU has no fp4 tensor cores."""
    datasheet: str = ""
    """Where the memory, bandwidth and FLOPs figures come from."""
    decode_lse_attention: bool = True
    """Whether vLLM's attention backends here return the softmax log-sum-exp for decode,
    which decode context parallel needs (vllm/v1/worker/cp_utils.py): every CUDA backend
    does (FlashAttention, FlashInfer, FlashMLA, CUTLASS MLA, Triton MLA); the CPU ones do not."""
    host_link_gbps: float = 25.0
    """Host-to-GPU copy rate from pinned memory in GB/s, per GPU: what a level-1 wake from
    vLLM's sleep mode moves the weights over. A planning figure, about 80 % of the slot's
    PCIe rate per direction (Gen4 x16: 32 GB/s, Gen5 x16: 64 GB/s); the default is Gen4's."""
    cpu_amx_tiles: bool = False
    """A CPU stand-in whose host has Intel AMX tiles: vLLM's CPU engine runs MLA with its
    AMX backend then, on 128-token blocks instead of 16 (vllm/platforms/cpu.py
    `get_attn_backend_cls`, `check_and_update_config`)."""

    @classmethod
    def cpu_standin(
        cls,
        memory_gib: float,
        *,
        name: str = "cpu-standin",
        bandwidth_gbps: float = 20.0,
        amx_tiles: bool = False,
    ) -> GpuProfile:
        """A CPU node's accelerator slot, planned as a GPU with `memory_gib` of memory;
        `amx_tiles`: the host has Intel AMX (vLLM's CPU engine then picks other kernels)."""
        if memory_gib <= 0:
            raise InvalidInventory(f"cpu stand-in memory_gib must be > 0, got {memory_gib}")
        return cls(
            name=name,
            memory_bytes=int(memory_gib * GIB),
            hbm_bandwidth_gbps=bandwidth_gbps,
            interconnect=Interconnect.HOST_MEMORY,
            link_bandwidth_gbps=bandwidth_gbps / 2,
            link_latency_us=10.0,
            cuda_graphs=False,
            bf16_tflops=1.0,
            datasheet="a CPU slot standing in for an accelerator (planning figures only)",
            decode_lse_attention=False,
            cpu_amx_tiles=amx_tiles,
        )


# Memory, HBM bandwidth and interconnect are the shared reference's figures for the five GPUs
# it lists; for the others (the names NVML prints for H100 PCIe and NVL, H200 NVL, the Max-Q
# RTX PRO 6000 and B200) memory is what nvidia-smi shows in MiB and bandwidth the datasheet's.
# A probed node replaces the memory with what CUDA gives the engine (docs/inventory.md). Link
# bandwidth is the measured PCIe P2P rate where known (Gen5 cards without one: 50 GB/s, a
# planning figure), else half the quoted bidirectional NVLink rate; the per-step latencies are
# planning assumptions for the cost model, not measurements. FLOPs are the datasheets' dense
# tensor-core peaks (the sparse figures halved).
_PROFILES: Final = (
    GpuProfile(
        name="rtx-pro-6000-blackwell",
        memory_bytes=97_887 * MIB,
        hbm_bandwidth_gbps=1_792.0,
        interconnect=Interconnect.PCIE,
        link_bandwidth_gbps=54.0,
        link_latency_us=4.0,
        compute_capability=(12, 0),
        native_fp8=True,
        host_link_gbps=50.0,  # PCIe Gen5 x16
        sm_count=188,
        # Datasheet peaks are quoted with 2:4 sparsity for fp4 (4 PFLOPS); dense is half, and
        # each wider dtype halves again.
        bf16_tflops=250.0,
        fp8_tflops=500.0,
        fp4_tflops=1000.0,
        datasheet="https://www.nvidia.com/en-us/data-center/rtx-pro-6000-blackwell-server-edition/",
        aliases=(
            "rtx-pro-6000",
            "rtx-pro-6000-server",
            "rtx-pro-6000-workstation",
            "rtxpro6000",
            # The names NVML prints (the Server and the 600 W Workstation Edition are one
            # chip with the same memory and clocks).
            "nvidia-rtx-pro-6000-blackwell-server-edition",
            "nvidia-rtx-pro-6000-blackwell-workstation-edition",
        ),
    ),
    GpuProfile(
        name="rtx-pro-6000-blackwell-max-q",
        memory_bytes=97_887 * MIB,
        hbm_bandwidth_gbps=1_792.0,
        interconnect=Interconnect.PCIE,
        link_bandwidth_gbps=54.0,
        link_latency_us=4.0,
        compute_capability=(12, 0),
        native_fp8=True,
        host_link_gbps=50.0,  # PCIe Gen5 x16
        sm_count=188,
        # The 300 W edition: the same chip and memory, its AI TOPS 3,511 against the 600 W
        # edition's 4,000 (sparse fp4), so every peak scaled by that ratio.
        bf16_tflops=219.0,
        fp8_tflops=439.0,
        fp4_tflops=878.0,
        datasheet="https://www.nvidia.com/en-us/products/workstations/professional-desktop-gpus/rtx-pro-6000-max-q/",
        aliases=(
            "rtx-pro-6000-max-q",
            "nvidia-rtx-pro-6000-blackwell-max-q-workstation-edition",
        ),
    ),
    GpuProfile(
        name="b200",
        memory_bytes=183_359 * MIB,
        hbm_bandwidth_gbps=8_000.0,
        interconnect=Interconnect.NVLINK,
        link_bandwidth_gbps=900.0,  # NVLink 5: 1.8 TB/s both directions
        link_latency_us=0.5,
        compute_capability=(10, 0),
        native_fp8=True,
        host_link_gbps=50.0,  # PCIe Gen5 x16 to the host
        sm_count=148,
        # HGX B200 quotes 8 GPUs with sparsity (bf16 36, fp8 72, fp4 144 PFLOPS): per GPU,
        # dense, an eighth halved.
        bf16_tflops=2_250.0,
        fp8_tflops=4_500.0,
        fp4_tflops=9_000.0,
        datasheet="https://www.nvidia.com/en-us/data-center/hgx/",
        aliases=("b200-sxm", "nvidia-b200"),
    ),
    GpuProfile(
        name="h200",
        memory_bytes=139 * GIB,
        hbm_bandwidth_gbps=4_800.0,
        interconnect=Interconnect.NVLINK,
        link_bandwidth_gbps=450.0,
        link_latency_us=0.5,
        compute_capability=(9, 0),
        native_fp8=True,
        host_link_gbps=50.0,  # PCIe Gen5 x16 to the host
        sm_count=132,
        bf16_tflops=989.0,
        fp8_tflops=1979.0,
        datasheet="https://www.nvidia.com/en-us/data-center/h200/",
        aliases=("h200-sxm", "nvidia-h200"),
    ),
    GpuProfile(
        name="h200-nvl",
        memory_bytes=143_771 * MIB,
        hbm_bandwidth_gbps=4_800.0,
        # The PCIe card; an NVLink bridge joins two or four of them (900 GB/s), which the
        # probe's NVLink check sees where it is fitted.
        interconnect=Interconnect.PCIE,
        link_bandwidth_gbps=50.0,
        link_latency_us=4.0,
        compute_capability=(9, 0),
        native_fp8=True,
        host_link_gbps=50.0,  # PCIe Gen5 x16
        sm_count=132,
        bf16_tflops=835.0,
        fp8_tflops=1_671.0,
        datasheet="https://www.nvidia.com/en-us/data-center/h200/",
        aliases=("nvidia-h200-nvl",),
    ),
    GpuProfile(
        name="h100",
        memory_bytes=79 * GIB,
        hbm_bandwidth_gbps=3_350.0,
        interconnect=Interconnect.NVLINK,
        link_bandwidth_gbps=450.0,
        link_latency_us=0.5,
        compute_capability=(9, 0),
        native_fp8=True,
        host_link_gbps=50.0,  # PCIe Gen5 x16 to the host
        sm_count=132,
        bf16_tflops=989.0,
        fp8_tflops=1979.0,
        datasheet="https://www.nvidia.com/en-us/data-center/h100/",
        aliases=("h100-sxm", "h100-80g", "h100-80gb", "nvidia-h100-80gb-hbm3"),
    ),
    GpuProfile(
        name="h100-pcie",
        memory_bytes=81_559 * MIB,
        hbm_bandwidth_gbps=2_000.0,  # HBM2e
        interconnect=Interconnect.PCIE,
        link_bandwidth_gbps=50.0,
        link_latency_us=4.0,
        compute_capability=(9, 0),
        native_fp8=True,
        host_link_gbps=50.0,  # PCIe Gen5 x16
        sm_count=114,
        bf16_tflops=756.0,
        fp8_tflops=1_513.0,
        datasheet="https://www.nvidia.com/en-us/data-center/h100/",
        aliases=("nvidia-h100-pcie", "h100-pcie-80gb"),
    ),
    GpuProfile(
        name="h100-nvl",
        memory_bytes=95_830 * MIB,
        hbm_bandwidth_gbps=3_900.0,
        # A PCIe card; NVLink bridges join pairs (600 GB/s), seen by the probe where fitted.
        interconnect=Interconnect.PCIE,
        link_bandwidth_gbps=50.0,
        link_latency_us=4.0,
        compute_capability=(9, 0),
        native_fp8=True,
        host_link_gbps=50.0,  # PCIe Gen5 x16
        sm_count=132,
        bf16_tflops=835.0,
        fp8_tflops=1_671.0,
        datasheet="https://www.nvidia.com/en-us/data-center/h100/",
        aliases=("nvidia-h100-nvl",),
    ),
    GpuProfile(
        name="a100-80g",
        memory_bytes=79 * GIB,
        hbm_bandwidth_gbps=2_000.0,
        interconnect=Interconnect.NVLINK,
        link_bandwidth_gbps=300.0,
        link_latency_us=0.7,
        compute_capability=(8, 0),
        native_fp8=False,
        host_link_gbps=25.0,  # PCIe Gen4 x16 to the host
        sm_count=108,
        bf16_tflops=312.0,
        datasheet="https://www.nvidia.com/en-us/data-center/a100/",
        aliases=("a100", "a100-80gb", "a100-sxm", "a100-sxm4-80gb", "nvidia-a100-sxm4-80gb"),
    ),
    GpuProfile(
        name="l40s",
        memory_bytes=int(44.4 * GIB),
        hbm_bandwidth_gbps=864.0,
        interconnect=Interconnect.PCIE,
        link_bandwidth_gbps=25.0,
        link_latency_us=5.0,
        compute_capability=(8, 9),
        native_fp8=True,
        host_link_gbps=25.0,  # PCIe Gen4 x16
        sm_count=142,
        bf16_tflops=362.0,
        fp8_tflops=733.0,
        datasheet="https://www.nvidia.com/en-us/data-center/l40s/",
        aliases=("nvidia-l40s",),
    ),
)

BUILTIN_GPU_PROFILES: Final[Mapping[str, GpuProfile]] = MappingProxyType(
    {p.name: p for p in _PROFILES}
)
_BY_ALIAS: Final[Mapping[str, GpuProfile]] = MappingProxyType(
    {alias: p for p in _PROFILES for alias in (p.name, *p.aliases)}
)


def _normalise(kind: str) -> str:
    return "-".join(kind.strip().lower().replace("_", " ").replace("-", " ").split())


def gpu_profile(kind: str) -> GpuProfile:
    """Look a built-in profile up by name or alias (case, spaces and underscores ignored),
    or by the name NVML prints ("NVIDIA H100 PCIe": the vendor's prefix is dropped)."""
    key = _normalise(kind)
    profile = _BY_ALIAS.get(key) or _BY_ALIAS.get(key.removeprefix("nvidia-"))
    if profile is None:
        raise UnknownGpu(
            f"unknown GPU kind {kind!r}; known: " + ", ".join(sorted(BUILTIN_GPU_PROFILES))
        )
    return profile


@dataclass(frozen=True)
class NodeInventory:
    """One node: its accelerators, how many are free, and its disk."""

    name: str
    gpu: GpuProfile
    gpus: int
    free_gpus: int
    disk_free_bytes: int | None = None
    """Free bytes where model weights are staged; None when unknown (no disk check)."""
    host_ram_bytes: int | None = None
    storage: str = ""
    """Identity of the filesystem holding the weights; nodes that share one (NFS) name the
    same storage, and the weights need to fit there once. Empty means the node's own disk."""

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidInventory("node name must not be empty")
        if self.gpus < 1:
            raise InvalidInventory(f"node {self.name}: gpus must be >= 1, got {self.gpus}")
        if not 0 <= self.free_gpus <= self.gpus:
            raise InvalidInventory(
                f"node {self.name}: free_gpus must be within 0..{self.gpus}, got {self.free_gpus}"
            )
        if self.disk_free_bytes is not None and self.disk_free_bytes < 0:
            raise InvalidInventory(f"node {self.name}: disk_free_bytes must be >= 0")

    @property
    def storage_id(self) -> str:
        return self.storage or f"node:{self.name}"


@dataclass(frozen=True)
class ClusterInventory:
    """The nodes a model may be placed on, as one snapshot."""

    nodes: tuple[NodeInventory, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.nodes:
            raise InvalidInventory("a cluster inventory needs at least one node")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise InvalidInventory(f"node names must be unique, got {names}")

    @classmethod
    def homogeneous(
        cls,
        gpu: GpuProfile | str,
        nodes: int,
        gpus_per_node: int,
        disk_free_gib: float | None = None,
        *,
        host_ram_gib: float | None = None,
        shared_disk: bool = False,
        free_gpus_per_node: int | None = None,
    ) -> ClusterInventory:
        """`nodes` identical nodes named node-0, node-1, ...; all GPUs free unless told."""
        profile = gpu_profile(gpu) if isinstance(gpu, str) else gpu
        if nodes < 1:
            raise InvalidInventory(f"nodes must be >= 1, got {nodes}")
        if disk_free_gib is not None and disk_free_gib < 0:
            raise InvalidInventory(f"disk_free_gib must be >= 0, got {disk_free_gib}")
        free = gpus_per_node if free_gpus_per_node is None else free_gpus_per_node
        return cls(
            nodes=tuple(
                NodeInventory(
                    name=f"node-{i}",
                    gpu=profile,
                    gpus=gpus_per_node,
                    free_gpus=free,
                    disk_free_bytes=None if disk_free_gib is None else int(disk_free_gib * GIB),
                    host_ram_bytes=None if host_ram_gib is None else int(host_ram_gib * GIB),
                    storage="shared" if shared_disk else "",
                )
                for i in range(nodes)
            )
        )

    def with_freed(self, freed: Mapping[str, int]) -> ClusterInventory:
        """The same snapshot with GPUs an outgoing model will release counted as free."""
        by_name = {n.name: n for n in self.nodes}
        unknown = sorted(set(freed) - set(by_name))
        if unknown:
            raise InvalidInventory(f"freed names unknown nodes: {unknown}")
        nodes = []
        for node in self.nodes:
            extra = freed.get(node.name, 0)
            if extra < 0:
                raise InvalidInventory(f"freed[{node.name!r}] must be >= 0, got {extra}")
            if node.free_gpus + extra > node.gpus:
                raise InvalidInventory(
                    f"node {node.name}: {node.free_gpus} free + {extra} freed exceeds "
                    f"its {node.gpus} GPUs"
                )
            nodes.append(replace(node, free_gpus=node.free_gpus + extra))
        return ClusterInventory(nodes=tuple(nodes))

    @property
    def total_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def free_gpus(self) -> int:
        return sum(n.free_gpus for n in self.nodes)

    def pools(self) -> tuple[tuple[GpuProfile, tuple[NodeInventory, ...]], ...]:
        """Nodes grouped by GPU kind: one model's layout never mixes kinds."""
        kinds: dict[str, list[NodeInventory]] = {}
        profiles: dict[str, GpuProfile] = {}
        for node in self.nodes:
            kinds.setdefault(node.gpu.name, []).append(node)
            profiles[node.gpu.name] = node.gpu
        return tuple((profiles[k], tuple(v)) for k, v in kinds.items())
