"""Pipeline stages on two GPU nodes: the placement Switchyard builds for TP1 x PP2 across
nodes puts one stage on each named node, and vLLM's Ray executor serves from that
placement group.

The CPU engine cannot run this (its executor keeps every rank in one process), so it is a
GPU test. Needs a Ray cluster (`RAY_ADDRESS`) with at least two nodes that have a GPU each
and vLLM's CUDA build on them; skipped otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from domain.deployment_config import AcceleratorConfig, LayoutConfig
from serve_apps.engine.placement_bundles import placement_for

pytestmark = pytest.mark.gpu

GPU = AcceleratorConfig(kind="gpu")


def _gpu_nodes() -> list[str]:
    import ray

    nodes: list[dict[str, Any]] = ray.nodes()
    return sorted(n["NodeID"] for n in nodes if n["Alive"] and n["Resources"].get("GPU", 0) >= 1)


@pytest.fixture(scope="module")
def gpu_cluster() -> Any:
    if not os.environ.get("RAY_ADDRESS"):
        pytest.skip("needs RAY_ADDRESS of a cluster with two GPU nodes")
    ray = pytest.importorskip("ray")
    ray.init(address=os.environ["RAY_ADDRESS"])
    try:
        if len(_gpu_nodes()) < 2:
            pytest.skip("needs two nodes with a GPU each")
        yield ray
    finally:
        ray.shutdown()


def test_tp1_x_pp2_runs_one_stage_on_each_of_two_gpu_nodes(
    gpu_cluster: Any, tmp_path: Path
) -> None:
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import (
        NodeAffinitySchedulingStrategy,
        PlacementGroupSchedulingStrategy,
    )

    first, second = _gpu_nodes()[:2]
    spec = placement_for(
        LayoutConfig(tp=1, pp=2), GPU, pp_across_nodes=True, stage_nodes=(first, second)
    )
    group = placement_group(
        [dict(b) for b in spec.bundles],
        strategy=spec.strategy,
        bundle_label_selector=list(spec.label_selectors) if spec.label_selectors else None,
    )
    gpu_cluster.get(group.ready(), timeout=300)
    try:
        table = gpu_cluster.util.placement_group_table(group)
        assert [table["bundles_to_node_id"][i] for i in range(2)] == [first, second]

        # The same bytes at the same path on both nodes (miniatures are deterministic), as a
        # shared cache or the manager's per-node staging would leave them.
        model_dir = str(tmp_path / "llama")
        write = gpu_cluster.remote(num_cpus=0)(_write_llama)
        gpu_cluster.get(
            [
                write.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)
                ).remote(model_dir)
                for n in (first, second)
            ],
            timeout=300,
        )
        serve_one = gpu_cluster.remote(num_cpus=0)(_serve_pp2)
        strategy = PlacementGroupSchedulingStrategy(
            placement_group=group, placement_group_capture_child_tasks=True
        )
        made = gpu_cluster.get(
            serve_one.options(scheduling_strategy=strategy).remote(model_dir),
            timeout=900,
        )
        assert made == 8
    finally:
        remove_placement_group(group)


def _write_llama(model_dir: str) -> str:
    from cluster.miniature_generator import write_miniature

    return str(write_miniature("llama", Path(model_dir)))


def _serve_pp2(model_dir: str) -> int:
    """vLLM with two pipeline stages over its Ray executor, inside the caller's placement
    group (captured: the stage workers take its two bundles)."""
    import vllm

    llm = vllm.LLM(
        model=model_dir,
        pipeline_parallel_size=2,
        distributed_executor_backend="ray",
        gpu_memory_utilization=0.3,
        max_model_len=512,
    )
    out = llm.generate(["hello"], vllm.SamplingParams(max_tokens=8, ignore_eos=True))
    return len(out[0].outputs[0].token_ids)
