"""Pipeline stages on two GPU nodes: the placement Switchyard deploys for a TP1 x PP2 replica
admission put on two nodes puts one stage on each, and vLLM's Ray executor serves from it.

The engine starts in an actor scheduled in that placement group, as Ray Serve LLM's replica
does: vLLM takes the current placement group only where one is captured (an actor with
`placement_group_capture_child_tasks`); from a plain task it would ask for a new one and wait.

The CPU engine cannot run this (its executor keeps every rank in one process), so it is a GPU
test. Needs a Ray cluster (`RAY_ADDRESS`) with at least two nodes that have a GPU each and
vLLM's CUDA build on them; skipped otherwise.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from serve_apps.engine.placement_bundles import placement_for
from tests.gpu.conftest import GIVEN_RAY_ADDRESS
from tests.gpu.product_engine import pipeline_config

pytestmark = pytest.mark.gpu


def _gpu_nodes(ray: Any) -> list[str]:
    nodes: list[dict[str, Any]] = ray.nodes()
    return sorted(n["NodeID"] for n in nodes if n["Alive"] and n["Resources"].get("GPU", 0) >= 1)


@pytest.fixture(scope="module")
def gpu_cluster(cuda_vllm: Any) -> Any:
    if not GIVEN_RAY_ADDRESS:
        pytest.skip("needs RAY_ADDRESS of a cluster with two GPU nodes")
    import ray

    ray.init(address=GIVEN_RAY_ADDRESS, ignore_reinit_error=True)
    if len(_gpu_nodes(ray)) < 2:
        pytest.skip("needs two nodes with a GPU each")
    return ray


class _Replica:
    """What Ray Serve LLM's replica does for the engine: build it in its placement group."""

    def __init__(self, config_json: str, model_dir: str) -> None:
        from domain.deployment_config import ModelDeploymentConfig
        from tests.gpu.product_engine import ProductEngine

        config = ModelDeploymentConfig.model_validate_json(config_json)
        self._engine = ProductEngine(config, Path(model_dir))

    def tokens(self) -> int:
        return self._engine.tokens()


def test_tp1_x_pp2_runs_one_stage_on_each_of_two_gpu_nodes(
    gpu_cluster: Any, tmp_path: Path
) -> None:
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import (
        NodeAffinitySchedulingStrategy,
        PlacementGroupSchedulingStrategy,
    )

    first, second = _gpu_nodes(gpu_cluster)[:2]
    config = pipeline_config(first, second)
    spec = placement_for(config.layout, config.accelerator, planned=config.placement)
    assert spec.strategy == "PACK"
    # The replica's own CPU rides in the first bundle, as Ray Serve LLM merges it.
    spec = replace(spec, bundles=({**spec.bundles[0], "CPU": 1.0}, *spec.bundles[1:]))
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
        replica = (
            gpu_cluster.remote(_Replica)
            .options(
                num_cpus=1,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=group,
                    placement_group_bundle_index=0,
                    placement_group_capture_child_tasks=True,
                ),
            )
            .remote(config.model_dump_json(), model_dir)
        )
        assert gpu_cluster.get(replica.tokens.remote(), timeout=900) == 8
    finally:
        remove_placement_group(group)


def _write_llama(model_dir: str) -> str:
    from cluster.miniature_generator import write_miniature

    return str(write_miniature("llama", Path(model_dir)))
