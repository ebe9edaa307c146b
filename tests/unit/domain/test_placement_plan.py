"""The node the planner chose is the node the engine gets: admission's placement of a replica
becomes the placement group Ray is asked for (domain/placement_plan.py)."""

from __future__ import annotations

import pytest

from domain.deployment_config import LayoutConfig, PlannedPlacement
from domain.placement_plan import planned_placement

pytestmark = pytest.mark.unit

IDS = {"node-a": "a" * 56, "node-b": "b" * 56}
H100 = {"node-a": "H100", "node-b": "H100"}


def test_a_replica_on_one_node_asks_only_for_the_gpu_kind() -> None:
    planned = planned_placement(LayoutConfig(tp=4), 2, (("node-a",),), IDS, H100)
    assert planned == PlannedPlacement(rank_nodes=(), accelerator_type="H100")


def test_pipeline_stages_on_two_nodes_pin_each_stages_ranks_to_its_node() -> None:
    planned = planned_placement(LayoutConfig(tp=2, pp=2), 1, (("node-b",), ("node-a",)), IDS, H100)
    assert isinstance(planned, PlannedPlacement)
    assert planned.rank_nodes == (IDS["node-b"],) * 2 + (IDS["node-a"],) * 2
    assert planned.accelerator_type == "H100"


def test_a_tp_group_on_whole_nodes_splits_its_ranks_between_them() -> None:
    planned = planned_placement(LayoutConfig(tp=16), 1, (("node-a", "node-b"),), IDS, H100)
    assert isinstance(planned, PlannedPlacement)
    assert planned.rank_nodes == (IDS["node-a"],) * 8 + (IDS["node-b"],) * 8


def test_copies_of_a_replica_pinned_across_nodes_are_refused_before_anything_starts() -> None:
    refused = planned_placement(LayoutConfig(tp=1, pp=2), 2, (("node-a",), ("node-b",)), IDS, H100)
    assert isinstance(refused, str)
    assert refused.startswith("not_deployable: TP1xPP2xDP1 places one replica on 2 nodes")
    assert "replicas: 2" in refused


def test_nodes_of_different_kinds_or_without_a_kind_ask_for_none() -> None:
    mixed = {"node-a": "H100", "node-b": None}
    planned = planned_placement(LayoutConfig(pp=2), 1, (("node-a",), ("node-b",)), IDS, mixed)
    assert isinstance(planned, PlannedPlacement) and planned.accelerator_type is None
    logical = planned_placement(LayoutConfig(), 1, (("node-a",),), IDS, {})
    assert logical == PlannedPlacement()


def test_a_node_that_left_since_admission_is_refused() -> None:
    refused = planned_placement(
        LayoutConfig(pp=2), 1, (("node-a",), ("node-c",)), IDS, {"node-a": None}
    )
    assert refused == "not_deployable: nodes ['node-c'] of admission's placement are gone"
