"""Placement groups from a layout, and whether they can be placed on the cluster now."""

from __future__ import annotations

import pytest

from cluster.ray_adapters.placement_check import placement_problem
from domain.deployment_config import AcceleratorConfig, LayoutConfig, PlannedPlacement
from serve_apps.engine.placement_bundles import PlacementSpec, placement_for

GPU = AcceleratorConfig(kind="gpu")
CPU = AcceleratorConfig(kind="cpu")


def _gpu_spec(tp: int, pp: int = 1, *, across: bool = False) -> PlacementSpec:
    """`across`: admission placed the stages on nodes n0, n1, ... (one each)."""
    planned = None
    if across:
        planned = PlannedPlacement(rank_nodes=tuple(f"n{s}" for s in range(pp) for _ in range(tp)))
    return placement_for(LayoutConfig(tp=tp, pp=pp), GPU, planned=planned)


def _gpus(*free: float) -> dict[str, dict[str, float]]:
    return {f"n{i}": {"CPU": 32.0, "GPU": n} for i, n in enumerate(free)}


# ---------------------------------------------------------------- placement_for


def test_gpu_bundles_are_one_gpu_per_rank_strictly_packed() -> None:
    spec = _gpu_spec(4)
    assert spec.bundles == ({"GPU": 1.0},) * 4
    assert spec.strategy == "STRICT_PACK"


def test_gpu_bundles_count_tp_times_pp() -> None:
    assert len(_gpu_spec(2, 3).bundles) == 6


def test_cpu_standin_bundles_take_a_cpu_and_the_custom_resource() -> None:
    spec = placement_for(LayoutConfig(tp=2), CPU)
    assert spec.bundles == ({"CPU": 1.0, "accel_slot": 1.0},) * 2
    assert spec.strategy == "STRICT_PACK"


def test_a_sleep_mode_engine_that_shares_asks_half_an_accelerator_per_rank() -> None:
    gpu = placement_for(LayoutConfig(tp=4), GPU, shared=True)
    assert gpu.bundles == tuple({"GPU": 0.5} for _ in range(4))
    standin = AcceleratorConfig(kind="cpu", standin_resource="accel_slot")
    cpu = placement_for(LayoutConfig(tp=2), standin, shared=True)
    assert cpu.bundles == tuple({"CPU": 1.0, "accel_slot": 0.5} for _ in range(2))


def test_cpu_standin_resource_name_is_configurable_or_absent() -> None:
    named = AcceleratorConfig(kind="cpu", standin_resource="fake_gpu")
    assert placement_for(LayoutConfig(), named).bundles == ({"CPU": 1.0, "fake_gpu": 1.0},)
    bare = AcceleratorConfig(kind="cpu", standin_resource=None)
    assert placement_for(LayoutConfig(), bare).bundles == ({"CPU": 1.0},)


def test_pp_planned_across_nodes_uses_pack_with_each_rank_on_its_planned_node() -> None:
    spec = _gpu_spec(4, 2, across=True)
    assert spec.strategy == "PACK"
    assert spec.label_selectors == tuple({"ray.io/node-id": f"n{r // 4}"} for r in range(8))
    assert spec.serve_deployment_options() == {
        "placement_group_bundle_label_selector": [dict(s) for s in spec.label_selectors]
    }


def test_pp_not_planned_across_nodes_stays_strict_pack() -> None:
    spec = _gpu_spec(4, 2)
    assert spec.strategy == "STRICT_PACK"
    assert spec.label_selectors is None and spec.serve_deployment_options() == {}


def test_every_rank_asks_for_the_gpu_kind_admission_planned_with() -> None:
    spec = placement_for(LayoutConfig(tp=2), GPU, planned=PlannedPlacement(accelerator_type="H100"))
    assert spec.strategy == "STRICT_PACK"
    assert spec.label_selectors == ({"ray.io/accelerator-type": "H100"},) * 2
    # A CPU stand-in has no GPU kind to ask for.
    cpu = placement_for(LayoutConfig(tp=2), CPU, planned=PlannedPlacement(accelerator_type="H100"))
    assert cpu.label_selectors is None


def test_a_planned_placement_names_one_node_per_rank() -> None:
    with pytest.raises(ValueError, match="names 3 nodes for 4 ranks"):
        placement_for(
            LayoutConfig(tp=2, pp=2), GPU, planned=PlannedPlacement(rank_nodes=("a",) * 3)
        )


def test_ray_serve_llm_form_is_a_fresh_copy() -> None:
    spec = _gpu_spec(2)
    form = spec.as_ray_serve_llm()
    assert form == {"bundles": [{"GPU": 1.0}, {"GPU": 1.0}], "strategy": "STRICT_PACK"}
    form["bundles"][0]["GPU"] = 9.0  # type: ignore[index]
    assert spec.bundles[0] == {"GPU": 1.0}


def test_bundles_are_independent_dicts() -> None:
    spec = _gpu_spec(2)
    assert spec.bundles[0] is not spec.bundles[1]


# ---------------------------------------------------------------- placement_problem


def test_tp4_fits_a_node_with_four_free_gpus() -> None:
    assert placement_problem(_gpu_spec(4), _gpus(4)) is None


def test_tp4_skips_a_full_node_for_one_with_room() -> None:
    assert placement_problem(_gpu_spec(4), _gpus(2, 4)) is None


def test_tp8_on_two_four_gpu_nodes_is_refused_naming_the_need() -> None:
    problem = placement_problem(_gpu_spec(8), _gpus(4, 4))
    assert problem is not None
    assert "replica 1 needs GPU=8 on one node" in problem
    assert "the most free on any node is GPU 4" in problem


def test_pack_spreads_bundles_across_nodes() -> None:
    assert placement_problem(_gpu_spec(4, 2, across=True), _gpus(4, 4)) is None


def test_pack_that_runs_out_names_the_bundle_and_the_node_it_is_pinned_to() -> None:
    problem = placement_problem(_gpu_spec(4, 2, across=True), _gpus(4, 3))
    assert problem == (
        "replica 1: bundle 8 of 8 (GPU=1) fits on no node (node n1, where admission placed it)"
    )


def test_a_pinned_bundle_does_not_take_another_nodes_gpus() -> None:
    # n1 is full; n2 has room, but admission placed the second stage on n1.
    assert placement_problem(_gpu_spec(1, 2, across=True), _gpus(1, 0, 8)) is not None


def test_a_gpu_kind_is_found_by_rays_accelerator_type_resource() -> None:
    spec = placement_for(LayoutConfig(tp=2), GPU, planned=PlannedPlacement(accelerator_type="H100"))
    l40s = {"a": {"CPU": 8.0, "GPU": 8.0, "accelerator_type:L40S": 1.0}}
    h100 = {**l40s, "b": {"CPU": 8.0, "GPU": 8.0, "accelerator_type:H100": 1.0}}
    assert placement_problem(spec, l40s) is not None
    assert placement_problem(spec, h100) is None


def test_replicas_consume_capacity() -> None:
    spec = _gpu_spec(4)
    assert placement_problem(spec, _gpus(4), replicas=1) is None
    problem = placement_problem(spec, _gpus(4), replicas=2)
    assert problem is not None
    assert problem.startswith("replica 2 needs GPU=4 on one node")
    assert "the most free on any node is GPU 0" in problem
    assert placement_problem(spec, _gpus(4, 4), replicas=2) is None
    assert placement_problem(spec, _gpus(8), replicas=2) is None


def test_pack_replicas_consume_capacity() -> None:
    spec = _gpu_spec(2, 2, across=True)
    assert placement_problem(spec, _gpus(4, 4), replicas=2) is None
    problem = placement_problem(spec, _gpus(4, 3), replicas=2)
    assert problem == (
        "replica 2: bundle 4 of 4 (GPU=1) fits on no node (node n1, where admission placed it)"
    )


def test_the_nodes_given_are_not_modified() -> None:
    nodes = _gpus(4, 4)
    placement_problem(_gpu_spec(4), nodes, replicas=2)
    assert nodes == _gpus(4, 4)


def test_cpu_standin_is_refused_naming_the_standin_resource() -> None:
    spec = placement_for(LayoutConfig(tp=4), CPU)
    nodes = {"a": {"CPU": 16.0, "accel_slot": 2.0}, "b": {"CPU": 16.0, "accel_slot": 3.0}}
    problem = placement_problem(spec, nodes)
    assert problem is not None
    assert "needs CPU=4, accel_slot=4 on one node" in problem
    assert "the most free on any node is accel_slot 3" in problem
    assert placement_problem(spec, {"a": {"CPU": 4.0, "accel_slot": 4.0}}) is None


def test_cpu_standin_also_needs_the_cpus_and_says_they_are_what_is_short() -> None:
    spec = placement_for(LayoutConfig(tp=4), CPU)
    problem = placement_problem(spec, {"a": {"CPU": 3.0, "accel_slot": 22.0}})
    assert problem is not None
    assert "the most free on any node is CPU 3" in problem


def test_cpu_only_bundles_report_the_free_cpus() -> None:
    spec = placement_for(LayoutConfig(tp=4), AcceleratorConfig(kind="cpu", standin_resource=None))
    problem = placement_problem(spec, {"a": {"CPU": 2.0}, "b": {"CPU": 3.0}})
    assert problem is not None
    assert "needs CPU=4 on one node" in problem
    assert "the most free on any node is CPU 3" in problem


@pytest.mark.parametrize("nodes", [{}, {"a": {"CPU": 8.0}}])
def test_no_gpu_anywhere_is_refused(nodes: dict[str, dict[str, float]]) -> None:
    problem = placement_problem(_gpu_spec(1), nodes)
    assert problem is not None
    assert "the most free on any node is GPU 0" in problem
