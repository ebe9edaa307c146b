"""The inventory probe on a real local Ray cluster with three raylets.

Two nodes declare CPU stand-in accelerators (`accel_slot`), one declares none; all share this
machine's disk. The probe runs one pinned task per node; operator overrides are applied by
label, by node id prefix and by IP, and the manager's admission inventory follows them and
Ray's live free resources.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cluster.fleet.manager_settings import ManagerSettings
from cluster.inventory.overrides import InventoryConfig, NodeOverride
from cluster.inventory.policy_inventory import policy_inventory
from cluster.inventory.ray_probe import probe_cluster
from cluster.inventory.records import ProbedCluster
from cluster.ray_adapters.ray_nodes import RayNodes
from cluster.staging.disk_report import weights_disk_report
from cluster.staging.staging_config import StagingConfig
from domain.deployment_config import AcceleratorConfig
from policies.inventory import ClusterInventory, Interconnect
from tests.support.waiting import wait_until

from .local_hub import LocalHub
from .tiny_hub_model import REPO, tiny_model_files

REPO_ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30
SLOTS = "accel_slot"


@dataclass(frozen=True)
class Nodes:
    head: str
    racked: str
    plain: str


@pytest.fixture(scope="module")
def nodes() -> Iterator[Nodes]:
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    # Raylets inherit the environment, so their workers can import the project.
    old_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), old_path]))
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False, "resources": {SLOTS: 2}},
    )
    try:
        racked = cluster.add_node(num_cpus=1, resources={SLOTS: 4}, labels={"rack": "r2"})
        plain = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=True)
        assert cluster.head_node is not None
        yield Nodes(head=cluster.head_node.node_id, racked=racked.node_id, plain=plain.node_id)
    finally:
        ray.shutdown()
        cluster.shutdown()
        if old_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old_path


def probe(tmp_path: Path, *overrides: NodeOverride) -> ProbedCluster:
    return probe_cluster(
        tmp_path / "cache",
        InventoryConfig(overrides=overrides),
        standin_resource=SLOTS,
        standin_memory_gib=4.0,
    )


def test_one_record_per_node_with_its_declared_standin_accelerators(nodes: Nodes, tmp_path: Path):
    result = probe(tmp_path)
    by_id = {f.node_id: f for f in result.facts}
    assert set(by_id) == {nodes.head, nodes.racked, nodes.plain}
    assert result.problems == ()
    head, racked, plain = by_id[nodes.head], by_id[nodes.racked], by_id[nodes.plain]
    assert (head.accelerator, head.gpu_count, head.gpu_model) == ("standin", 2, "cpu-standin")
    assert (racked.accelerator, racked.gpu_count) == ("standin", 4)
    assert (plain.accelerator, plain.gpu_count) == ("none", 0)
    for node in (head, racked, plain):
        assert node.interconnect in (Interconnect.HOST_MEMORY, None)
        assert node.gpu_memory_bytes in (4 * GIB, 0)
        assert node.disk_free_bytes is not None and node.disk_free_bytes > 0
        assert node.host_ram_bytes is not None and node.host_ram_bytes > GIB
        assert node.cache_dir == str(tmp_path / "cache")
        assert node.overridden == ()
        # This machine has no NVIDIA driver: the probe says why it found no GPU.
        assert any(note.startswith("nvml: ") for note in node.notes)


def test_overrides_apply_by_label_id_prefix_and_ip_and_unmatched_ones_are_reported(
    nodes: Nodes, tmp_path: Path
):
    result = probe(
        tmp_path,
        NodeOverride(label="rack=r2", gpu_count=3, disk_free_gib=7, interconnect="pcie"),
        NodeOverride(node_name=nodes.head[:10], host_ram_gib=100, gpu_memory_gib=8),
        NodeOverride(node_ip="10.9.9.9", gpu_count=1),
    )
    by_id = {f.node_id: f for f in result.facts}
    racked, head, plain = by_id[nodes.racked], by_id[nodes.head], by_id[nodes.plain]
    assert (racked.gpu_count, racked.disk_free_bytes) == (3, 7 * GIB)
    assert racked.interconnect is Interconnect.PCIE
    assert set(racked.overridden) == {"gpu_count", "disk_free_bytes", "interconnect"}
    assert (head.host_ram_bytes, head.gpu_memory_bytes) == (100 * GIB, 8 * GIB)
    assert set(head.overridden) == {"host_ram_bytes", "gpu_memory_bytes"}
    assert plain.overridden == ()
    assert result.problems == ("override node_ip=10.9.9.9 matches no node",)
    assert result.to_json()["nodes"][0]["overridden"] is not None


def test_the_managers_inventory_uses_overrides_and_what_ray_has_free(nodes: Nodes, tmp_path: Path):
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    settings = ManagerSettings(
        state_dir=tmp_path,
        accelerator=AcceleratorConfig(kind="cpu", standin_resource=SLOTS),
        inventory=InventoryConfig(overrides=(NodeOverride(label="rack=r2", gpu_count=3),)),
    )
    nodes_port = RayNodes(settings)

    def inventory_now() -> ClusterInventory:
        probed = nodes_port.probe()
        return policy_inventory(probed.facts, probed.available, settings.accelerator, probed.totals)

    inventory = inventory_now()
    by_name = {n.name: n for n in inventory.nodes}
    assert set(by_name) == {nodes.head[:12], nodes.racked[:12]}  # the plain node has none
    assert (by_name[nodes.racked[:12]].gpus, by_name[nodes.racked[:12]].free_gpus) == (3, 3)
    assert (by_name[nodes.head[:12]].gpus, by_name[nodes.head[:12]].free_gpus) == (2, 2)
    # Three slots fit only on the racked node. Once claimed, admission sees none free there:
    # the override says it has three, and Ray's placements hold three (Ray itself still has
    # one of its four).
    group = placement_group([{SLOTS: 3.0}], strategy="STRICT_PACK")
    ray.get(group.ready(), timeout=60)
    try:
        # Ray's view of available resources catches up with a new group within moments.
        def free() -> dict[str, int]:
            return {n.name: n.free_gpus for n in inventory_now().nodes}

        wait_until(lambda: free()[nodes.racked[:12]] == 0, 30, message=lambda: str(free()))
        assert free()[nodes.head[:12]] == 2
    finally:
        remove_placement_group(group)


def test_dry_run_disk_verdicts_judge_the_real_size_on_every_probed_node(
    nodes: Nodes, tmp_path: Path
):
    files = tiny_model_files()
    result = probe(tmp_path, NodeOverride(label="rack=r2", disk_free_gib=0))
    with LocalHub() as hub:
        hub.add_repo(REPO, files)
        config = StagingConfig(cache_dir=tmp_path / "cache", reserve_gib=0, hub_endpoint=hub.url)
        report = weights_disk_report(REPO, result.facts, config)
    shards = sum(len(v) for k, v in files.items() if k.endswith(".safetensors"))
    assert report.weight_bytes == shards
    verdicts = {v.node: v for v in report.verdicts}
    assert set(verdicts) == {nodes.head[:12], nodes.racked[:12], nodes.plain[:12]}
    assert all(v.need_bytes > shards - 1 for v in verdicts.values())
    assert verdicts[nodes.racked[:12]].fits is False
    assert verdicts[nodes.racked[:12]].free_bytes == 0
    assert verdicts[nodes.head[:12]].fits is True
    assert not report.fits_everywhere
    assert report.to_json()["disk"][0]["need_bytes"] == report.verdicts[0].need_bytes
