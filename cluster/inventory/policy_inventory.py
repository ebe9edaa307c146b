"""From probed (and overridden) node facts to the admission policy's typed inventory (pure).

Free accelerators come from Ray's available resources (what placement groups have not
claimed), capped by the count the facts give: an override that lowers a node's GPU count
also lowers what admission may use there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from cluster.inventory.records import NodeFacts
from domain.deployment_config import AcceleratorConfig
from policies.errors import UnknownGpu
from policies.inventory import (
    ClusterInventory,
    GpuProfile,
    Interconnect,
    NodeInventory,
    gpu_profile,
)

SHARED_CACHE_STORAGE = "cache"
"""Storage id of the one weight cache every node reads (the manager stages in shared mode)."""

# Link figures when a probe or override contradicts a profile's interconnect (e.g. an H100
# PCIe card): planning assumptions for the cost model, like the profiles' own latencies.
_LINKS: Mapping[Interconnect, tuple[float, float]] = {
    Interconnect.PCIE: (25.0, 5.0),
    Interconnect.NVLINK: (300.0, 0.7),
    Interconnect.HOST_MEMORY: (10.0, 10.0),
}
# An unknown GPU is planned with a conservative memory bandwidth (GB/s), below every
# built-in profile, so its throughput ceiling is not overstated.
_UNKNOWN_GPU_BANDWIDTH_GBPS = 800.0


def profile_for(facts: NodeFacts) -> GpuProfile:
    """The built-in profile of the node's model with its measured memory and links."""
    if facts.accelerator == "standin":
        return GpuProfile.cpu_standin(facts.gpu_memory_bytes / 2**30, amx_tiles=facts.cpu_amx_tiles)
    try:
        profile = gpu_profile(facts.gpu_model)
    except UnknownGpu:
        link = facts.interconnect or Interconnect.PCIE
        bandwidth, latency = _LINKS[link]
        return GpuProfile(
            name="-".join(facts.gpu_model.lower().split()) or "unknown-gpu",
            memory_bytes=facts.gpu_memory_bytes,
            hbm_bandwidth_gbps=_UNKNOWN_GPU_BANDWIDTH_GBPS,
            interconnect=link,
            link_bandwidth_gbps=bandwidth,
            link_latency_us=latency,
        )
    profile = replace(profile, memory_bytes=facts.gpu_memory_bytes or profile.memory_bytes)
    if facts.interconnect is not None and facts.interconnect is not profile.interconnect:
        bandwidth, latency = _LINKS[facts.interconnect]
        profile = replace(
            profile,
            interconnect=facts.interconnect,
            link_bandwidth_gbps=bandwidth,
            link_latency_us=latency,
        )
    return profile


def policy_inventory(
    facts: Sequence[NodeFacts],
    available: Mapping[str, Mapping[str, float]],
    accelerator: AcceleratorConfig,
    totals: Mapping[str, Mapping[str, float]] | None = None,
) -> ClusterInventory:
    """Nodes with the accelerator kind the fleet deploys on; `available` and `totals` are
    Ray's available and total resources keyed by full node id. A node's free accelerators
    are its count (probed or overridden) less what Ray's placements hold there, so an
    override that declares fewer than Ray has still counts every running engine."""
    wanted = "gpu" if accelerator.kind == "gpu" else "standin"
    key = "GPU" if accelerator.kind == "gpu" else (accelerator.standin_resource or "CPU")
    nodes = []
    for node in facts:
        if node.accelerator != wanted or node.gpu_count < 1:
            continue
        free = int(available.get(node.node_id, {}).get(key, 0))
        total = (totals or {}).get(node.node_id, {}).get(key)
        if total is not None:
            free = node.gpu_count - (int(total) - free)
        nodes.append(
            NodeInventory(
                name=node.name,
                gpu=profile_for(node),
                gpus=node.gpu_count,
                free_gpus=max(0, min(free, node.gpu_count)),
                disk_free_bytes=node.disk_free_bytes,
                host_ram_bytes=node.host_ram_bytes,
                storage=SHARED_CACHE_STORAGE,
            )
        )
    return ClusterInventory(nodes=tuple(nodes))
