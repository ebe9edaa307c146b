"""Probed and overridden node facts become the admission policy's inventory."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from cluster.inventory.local_probe import probe_this_node
from cluster.inventory.overrides import NodeOverride, apply_overrides
from cluster.inventory.policy_inventory import policy_inventory, profile_for
from cluster.inventory.records import DRIVER_RESERVE_FRACTION, GpuFactSource, NodeFacts
from domain.deployment_config import AcceleratorConfig
from policies.admission import AdmissionRequest, admit
from policies.checkpoint.hf_config import load_model_spec
from policies.inventory import Interconnect, gpu_profile
from tests.unit.inventory.test_inventory_overrides import cpu_probe, gpu_probe

GIB = 2**30
GPU = AcceleratorConfig(kind="gpu")
CPU = AcceleratorConfig(kind="cpu", standin_resource="accel_slot")


def facts(probe_override: NodeOverride | None = None, **probe: object) -> NodeFacts:
    overrides = (probe_override,) if probe_override else ()
    return apply_overrides(gpu_probe(**probe), overrides, standin_memory_gib=4.0)  # type: ignore[arg-type]


def test_gpu_nodes_use_the_builtin_profile_with_measured_memory() -> None:
    node = facts()
    inventory = policy_inventory([node], {node.node_id: {"GPU": 6.0}}, GPU)
    (only,) = inventory.nodes
    assert only.name == node.name
    assert only.gpu.name == "h200"
    assert only.gpu.memory_bytes == node.gpu_memory_bytes  # as CUDA gives it (or estimated)
    assert only.gpu.memory_bytes < 143_771 * 2**20  # below NVML's total: the driver's reserve
    assert only.gpu.hbm_bandwidth_gbps == gpu_profile("h200").hbm_bandwidth_gbps
    assert (only.gpus, only.free_gpus) == (8, 6)
    assert only.disk_free_bytes == 1_200 * GIB
    assert only.host_ram_bytes == 2_048 * GIB


def test_a_probed_pcie_link_replaces_the_profiles_nvlink() -> None:
    h100_pcie = facts(model="NVIDIA H100 80GB HBM3", interconnect=Interconnect.PCIE)
    profile = profile_for(h100_pcie)
    assert profile.name == "h100"
    assert profile.interconnect is Interconnect.PCIE
    assert profile.link_bandwidth_gbps < gpu_profile("h100").link_bandwidth_gbps


def test_an_unknown_gpu_is_planned_with_its_memory_and_a_conservative_bandwidth() -> None:
    profile = profile_for(facts(model="NVIDIA Future GPU", memory_mib=200_000))
    assert profile.name == "nvidia-future-gpu"
    assert profile.memory_bytes == int(200_000 * 2**20 * (1 - DRIVER_RESERVE_FRACTION))
    assert profile.hbm_bandwidth_gbps < min(
        gpu_profile(k).hbm_bandwidth_gbps for k in ("h200", "h100", "a100-80g", "l40s")
    )


def test_free_accelerators_are_capped_by_an_overridden_count() -> None:
    node = facts(NodeOverride(node_ip="10.0.0.5", gpu_count=2))
    inventory = policy_inventory([node], {node.node_id: {"GPU": 8.0}}, GPU)
    assert (inventory.nodes[0].gpus, inventory.nodes[0].free_gpus) == (2, 2)


def test_an_overridden_count_is_free_less_what_ray_placements_hold() -> None:
    # Ray has 8 GPUs there, 7 available: one engine holds one. Of the 2 the override
    # declares, 1 is free (not min(7, 2)).
    node = facts(NodeOverride(node_ip="10.0.0.5", gpu_count=2))
    ray_sees = {node.node_id: {"GPU": 7.0}}
    inventory = policy_inventory([node], ray_sees, GPU, {node.node_id: {"GPU": 8.0}})
    assert inventory.nodes[0].free_gpus == 1
    full = policy_inventory([node], {node.node_id: {}}, GPU, {node.node_id: {"GPU": 8.0}})
    assert full.nodes[0].free_gpus == 0


def test_cpu_fleets_plan_the_declared_standin_slots_and_skip_gpu_nodes() -> None:
    cpu = apply_overrides(cpu_probe(slots=4), (), standin_memory_gib=4.0)
    gpu = facts()
    available = {cpu.node_id: {"accel_slot": 3.0, "CPU": 8.0}, gpu.node_id: {"GPU": 8.0}}
    inventory = policy_inventory([cpu, gpu], available, CPU)
    (only,) = inventory.nodes
    assert only.name == cpu.name
    assert only.gpu.interconnect is Interconnect.HOST_MEMORY
    assert only.gpu.memory_bytes == 4 * GIB
    assert (only.gpus, only.free_gpus) == (4, 3)
    assert [n.name for n in policy_inventory([cpu, gpu], available, GPU).nodes] == [gpu.name]


def test_admission_follows_the_overrides() -> None:
    """MiniMax-M2.5 (block FP8, ~214 GiB) on the story's PCIe box: admitted as probed, and
    refused once an override says the cache volume has only 100 GiB free."""
    config = resources.files("cluster.miniature_generator").joinpath(
        "reference_configs/MiniMax-M2.5.config.json"
    )
    spec = load_model_spec(Path(str(config)))
    probe = gpu_probe(
        model="NVIDIA RTX PRO 6000 Blackwell Server Edition",
        memory_mib=97_887,
        interconnect=Interconnect.PCIE,
    )
    node = apply_overrides(probe, (), standin_memory_gib=4.0)
    available = {node.node_id: {"GPU": 8.0}}
    assert admit(spec, None, policy_inventory([node], available, GPU), AdmissionRequest()).admitted
    small_disk = apply_overrides(
        probe, (NodeOverride(node_ip="10.0.0.5", disk_free_gib=100),), standin_memory_gib=4.0
    )
    decision = admit(spec, None, policy_inventory([small_disk], available, GPU), AdmissionRequest())
    assert not decision.admitted
    assert any(
        r.code == "disk_insufficient" and f"node {node.name} has 100.0 GiB free" in r.message
        for r in decision.reasons
    )


def test_probing_this_cpu_machine_reports_declared_slots_disk_and_ram(tmp_path: Path) -> None:
    """The real probe on this machine: no NVML and no GPU, so the declared slots count."""
    probe = probe_this_node(
        node_id="0" * 20, node_ip="127.0.0.1", cache_dir=str(tmp_path / "not-yet"), standin_slots=4
    )
    if probe.gpus.devices:
        pytest.skip("this machine has a GPU; tests/gpu covers it")
    assert probe.gpus.source is GpuFactSource.DECLARED
    assert probe.standin_slots == 4
    assert probe.disk_free_bytes is not None and probe.disk_free_bytes > 0
    assert probe.host_ram_bytes is not None and probe.host_ram_bytes > GIB
    assert any(note.startswith("nvml: ") for note in probe.notes)
