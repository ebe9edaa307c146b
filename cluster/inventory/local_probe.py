"""Probe the node this runs on: GPUs (NVML, then nvidia-smi), cache-volume disk, host RAM.

Plain functions; `ray_probe.py` runs `probe_this_node` as a Ray task pinned to each node.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

from cluster.inventory.nvml_reader import NvmlUnavailable, read_nvml
from cluster.inventory.records import GpuDevice, GpuFacts, GpuFactSource, NodeProbe
from cluster.inventory.topology_text import TopologyParseError, parse_query_gpu, parse_topology
from policies.errors import UnknownGpu
from policies.inventory import gpu_profile

_SMI_TIMEOUT_S = 30.0


def probe_this_node(
    *,
    node_id: str,
    node_ip: str,
    cache_dir: str,
    standin_slots: int,
    labels: tuple[tuple[str, str], ...] = (),
    ray_gpus: int = 0,
    ray_gpu_kind: str | None = None,
) -> NodeProbe:
    """`ray_gpus`/`ray_gpu_kind`: what Ray says the node has (its `GPU` resource and
    `accelerator_type:`): the GPUs themselves when neither NVML nor nvidia-smi can be read,
    else the count set beside what they saw (overrides.base_facts)."""
    notes: list[str] = []
    gpus = read_gpus(notes)
    if not gpus.devices and ray_gpus > 0:
        gpus = declared_gpus(ray_gpus, ray_gpu_kind)
    if not gpus.devices and standin_slots > 0:
        gpus = GpuFacts(devices=(), interconnect=None, source=GpuFactSource.DECLARED)
    return NodeProbe(
        node_id=node_id,
        node_ip=node_ip,
        hostname=socket.gethostname(),
        gpus=gpus,
        standin_slots=standin_slots if not gpus.devices else 0,
        cache_dir=cache_dir,
        disk_free_bytes=disk_free_bytes(Path(cache_dir)),
        host_ram_bytes=host_ram_bytes(),
        labels=labels,
        notes=tuple(notes),
        cpu_amx_tiles=cpu_amx_tiles(),
        ray_gpus=ray_gpus,
        ray_accelerator_type=ray_gpu_kind,
    )


def cpu_amx_tiles(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether the CPU flags `amx_tile` (the test vLLM's CPU platform makes with torch's
    `_is_amx_tile_supported`); False where /proc/cpuinfo cannot be read."""
    try:
        with cpuinfo.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if line.startswith("flags"):
                    return "amx_tile" in line.split()
    except OSError:
        return False
    return False


def read_gpus(notes: list[str]) -> GpuFacts:
    """NVML first; `nvidia-smi` text when NVML is missing; no GPUs when neither answers.
    Each failure is appended to `notes` so `status` can say why a node shows no GPU."""
    try:
        return read_nvml()
    except NvmlUnavailable as exc:
        notes.append(f"nvml: {exc}")
    try:
        return read_nvidia_smi()
    except (OSError, subprocess.SubprocessError, TopologyParseError) as exc:
        notes.append(f"nvidia-smi: {exc}")
    return GpuFacts(devices=(), interconnect=None, source=GpuFactSource.NONE)


def declared_gpus(count: int, kind: str | None) -> GpuFacts:
    """GPUs Ray declares but the probe cannot see: the kind's built-in memory, links unknown."""
    model = kind or "unknown"
    try:
        memory = gpu_profile(model).memory_bytes
    except UnknownGpu:
        memory = 0
    devices = tuple(GpuDevice(i, model, memory) for i in range(count))
    return GpuFacts(devices=devices, interconnect=None, source=GpuFactSource.DECLARED)


def read_nvidia_smi() -> GpuFacts:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise FileNotFoundError("nvidia-smi is not on PATH")
    query = _run([smi, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"])
    devices = parse_query_gpu(query)
    interconnect = None
    if len(devices) > 1:
        interconnect = parse_topology(_run([smi, "topo", "-m"])).interconnect
    return GpuFacts(devices=devices, interconnect=interconnect, source=GpuFactSource.NVIDIA_SMI)


def _run(command: list[str]) -> str:
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=_SMI_TIMEOUT_S, check=False
    )
    if result.returncode != 0:
        raise subprocess.SubprocessError(
            f"{' '.join(command[1:])} exited {result.returncode}: {result.stderr.strip()[:200]}"
        )
    return result.stdout


def disk_free_bytes(cache_dir: Path) -> int | None:
    """Free bytes on the volume that holds (or will hold) `cache_dir`: the nearest existing
    ancestor answers when the cache was not created yet."""
    for path in (cache_dir, *cache_dir.parents):
        if path.exists():
            return shutil.disk_usage(path).free
    return None


def host_ram_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None
