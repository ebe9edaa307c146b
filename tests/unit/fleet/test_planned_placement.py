"""The node the planner chose is the node the engine gets, through the fleet engine: an add
deploys the placement admission judged, and refuses one that cannot be deployed as planned
before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from domain.deployment_config import AcceleratorConfig, LayoutConfig
from domain.operation import Outcome
from domain.operation_request import AddRequest
from tests.support.fleet_configs import OLD
from tests.support.memory_cluster import NODE_ID, OTHER_NODE_IDS, MemoryCluster
from tests.support.memory_fleet import Fleet

pytestmark = pytest.mark.unit

GPU = AcceleratorConfig(kind="gpu")
GPU_MODEL = OLD.model_copy(update={"accelerator": GPU})


def _two_gpu_nodes(tmp_path: Path) -> Fleet:
    """Two nodes of one H100 each, Ray labelling them H100."""
    cluster = MemoryCluster(tmp_path / "nodes")
    cluster.nodes.gpu_model = "h100"
    cluster.nodes.slot_memory_gib = 79.0
    cluster.nodes.slots = 1
    cluster.nodes.more_nodes = 1
    cluster.nodes.ray_accelerator_type = "H100"
    return Fleet(tmp_path / "state", cluster, accelerator=GPU)


def test_a_pipeline_admission_put_on_two_nodes_is_deployed_pinned_to_them(
    tmp_path: Path,
) -> None:
    fleet = _two_gpu_nodes(tmp_path)
    config = GPU_MODEL.model_copy(update={"layout": LayoutConfig(pp=2)})
    result = fleet.engine.run(AddRequest(config=config))
    assert result.outcome is Outcome.DONE, result.message
    (deployed,) = fleet.cluster.serve.configs.values()
    assert deployed.placement is not None
    assert set(deployed.placement.rank_nodes) == {NODE_ID, OTHER_NODE_IDS[0]}
    assert deployed.placement.accelerator_type == "H100"
    # Kept with the fleet's config: a redeploy lands where admission judged it.
    assert fleet.engine.fleet().models[config.name].config.placement == deployed.placement


def test_copies_of_a_replica_spanning_nodes_are_refused_and_nothing_starts(
    tmp_path: Path,
) -> None:
    fleet = _two_gpu_nodes(tmp_path)
    fleet.cluster.nodes.slots = 2
    config = GPU_MODEL.model_copy(update={"layout": LayoutConfig(tp=2, pp=2), "replicas": 2})
    result = fleet.engine.run(AddRequest(config=config))
    assert result.outcome is Outcome.REJECTED
    assert "not_deployable" in result.message and "replicas: 2" in result.message
    assert fleet.cluster.serve.deployed == []


def test_a_replica_on_one_node_asks_for_the_planned_gpu_kind_only(tmp_path: Path) -> None:
    fleet = _two_gpu_nodes(tmp_path)
    result = fleet.engine.run(AddRequest(config=GPU_MODEL))
    assert result.outcome is Outcome.DONE, result.message
    (deployed,) = fleet.cluster.serve.configs.values()
    assert deployed.placement is not None
    assert (deployed.placement.rank_nodes, deployed.placement.accelerator_type) == ((), "H100")


def test_diff_refuses_copies_of_a_replica_spanning_nodes_as_apply_would(tmp_path: Path) -> None:
    from domain.fleet_file import parse_fleet_file

    fleet = _two_gpu_nodes(tmp_path)
    fleet.cluster.nodes.slots = 2
    desired = parse_fleet_file(
        "models:\n  - {name: wide, source: 'miniature:llama', layout: {tp: 2, pp: 2}, "
        "replicas: 2}\n",
        "fleet.yaml",
    )
    plan = fleet.engine.plan(desired).to_json()
    (add,) = plan["changes"]
    assert not add["admitted"]
    assert any("not_deployable" in r and "replicas: 2" in r for r in add["reasons"])
