"""GPU profiles and cluster inventories."""

from __future__ import annotations

import pytest

from policies.errors import InvalidInventory, UnknownGpu
from policies.inventory import (
    BUILTIN_GPU_PROFILES,
    ClusterInventory,
    GpuProfile,
    Interconnect,
    NodeInventory,
    gpu_profile,
)
from policies.units import GIB, MIB


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("rtx-pro-6000", "rtx-pro-6000-blackwell"),
        ("RTX PRO 6000", "rtx-pro-6000-blackwell"),
        ("h200", "h200"),
        ("H100_SXM", "h100"),
        ("a100", "a100-80g"),
        ("L40S", "l40s"),
    ],
)
def test_aliases_resolve_to_builtin_profiles(alias: str, name: str) -> None:
    assert gpu_profile(alias).name == name


def test_builtin_profiles_carry_the_reference_figures() -> None:
    rtx = gpu_profile("rtx-pro-6000")
    assert rtx.memory_bytes == 97_887 * MIB
    assert rtx.interconnect is Interconnect.PCIE
    assert rtx.hbm_bandwidth_gbps == 1792
    assert gpu_profile("h200").interconnect is Interconnect.NVLINK
    assert set(BUILTIN_GPU_PROFILES) >= {
        "rtx-pro-6000-blackwell",
        "h200",
        "h100",
        "a100-80g",
        "l40s",
    }


def test_builtin_table_is_immutable() -> None:
    with pytest.raises(TypeError):
        BUILTIN_GPU_PROFILES["x"] = gpu_profile("h200")  # type: ignore[index]


def test_unknown_gpu_kind_lists_the_known_ones() -> None:
    with pytest.raises(UnknownGpu, match=r"unknown GPU kind 'tpu-v5'.*h200"):
        gpu_profile("tpu-v5")


def test_cpu_standin_profile_takes_its_memory_from_config() -> None:
    standin = GpuProfile.cpu_standin(4.0)
    assert standin.name == "cpu-standin"
    assert standin.memory_bytes == 4 * GIB
    assert standin.interconnect is Interconnect.HOST_MEMORY
    assert not standin.cuda_graphs
    with pytest.raises(InvalidInventory):
        GpuProfile.cpu_standin(0)


def test_homogeneous_cluster_has_named_nodes_with_all_gpus_free() -> None:
    cluster = ClusterInventory.homogeneous("h100", 2, 8, disk_free_gib=500)
    assert [n.name for n in cluster.nodes] == ["node-0", "node-1"]
    assert cluster.total_gpus == cluster.free_gpus == 16
    assert cluster.nodes[0].disk_free_bytes == 500 * GIB
    assert cluster.nodes[0].storage_id != cluster.nodes[1].storage_id


def test_shared_disk_nodes_name_one_storage() -> None:
    cluster = ClusterInventory.homogeneous("h100", 2, 8, 500, shared_disk=True)
    assert cluster.nodes[0].storage_id == cluster.nodes[1].storage_id


def test_freed_gpus_are_added_to_the_free_count() -> None:
    cluster = ClusterInventory.homogeneous("h200", 1, 8, free_gpus_per_node=2)
    assert cluster.with_freed({"node-0": 4}).free_gpus == 6


@pytest.mark.parametrize(
    ("freed", "message"),
    [({"node-9": 1}, "unknown nodes"), ({"node-0": 7}, "exceeds"), ({"node-0": -1}, ">= 0")],
)
def test_freed_gpus_must_name_real_nodes_and_stay_within_capacity(
    freed: dict[str, int], message: str
) -> None:
    cluster = ClusterInventory.homogeneous("h200", 1, 8, free_gpus_per_node=2)
    with pytest.raises(InvalidInventory, match=message):
        cluster.with_freed(freed)


def test_inventories_reject_contradictions() -> None:
    gpu = gpu_profile("h200")
    with pytest.raises(InvalidInventory, match="free_gpus"):
        NodeInventory(name="a", gpu=gpu, gpus=4, free_gpus=5)
    with pytest.raises(InvalidInventory, match="unique"):
        node = NodeInventory(name="a", gpu=gpu, gpus=4, free_gpus=4)
        ClusterInventory(nodes=(node, node))
    with pytest.raises(InvalidInventory, match="at least one node"):
        ClusterInventory(nodes=())


def test_pools_group_nodes_by_gpu_kind() -> None:
    h200 = NodeInventory(name="a", gpu=gpu_profile("h200"), gpus=8, free_gpus=8)
    l40s = NodeInventory(name="b", gpu=gpu_profile("l40s"), gpus=4, free_gpus=4)
    pools = ClusterInventory(nodes=(h200, l40s)).pools()
    assert [(gpu.name, [n.name for n in nodes]) for gpu, nodes in pools] == [
        ("h200", ["a"]),
        ("l40s", ["b"]),
    ]
