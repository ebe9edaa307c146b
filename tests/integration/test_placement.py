"""Placement from a layout on a multi-raylet cluster (2 nodes x 4 stand-in accelerators).

`ray.cluster_utils.Cluster` starts real raylets on this machine; each "GPU" node declares
4 slots of the custom resource that stands in for GPUs on the CPU (shared reference, §6).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from domain.deployment_config import (
    AcceleratorConfig,
    LayoutConfig,
    ModelDeploymentConfig,
    PlannedPlacement,
)
from serve_apps.engine.placement_bundles import placement_for
from tests.support.running_stack import free_port

SLOTS = "accel_slot"
CPU = AcceleratorConfig(kind="cpu", standin_resource=SLOTS)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from cluster.startup.ray_auth import apply_token_auth_default

    apply_token_auth_default()
    import ray
    from ray.cluster_utils import Cluster

    # The dashboard serves Ray's state API, from which a deployment's start-up steps are
    # read (the replica's worker timestamps and its log).
    test_cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 4, "include_dashboard": True, "dashboard_port": free_port()},
    )
    for _ in range(2):
        test_cluster.add_node(num_cpus=8, resources={SLOTS: 4})
    test_cluster.wait_for_nodes()
    ray.init(address=test_cluster.address, namespace="switchyard")
    try:
        yield test_cluster
    finally:
        from ray import serve

        serve.shutdown()
        ray.shutdown()
        test_cluster.shutdown()


def _accelerator_nodes() -> list[str]:
    import ray

    return sorted(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get(SLOTS))


def _bundle_nodes(spec: Any) -> list[str]:
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    group = placement_group(
        [dict(b) for b in spec.bundles],
        strategy=spec.strategy,
        bundle_label_selector=list(spec.label_selectors) if spec.label_selectors else None,
    )
    try:
        ray.get(group.ready(), timeout=60)
        table = ray.util.placement_group_table(group)
        return [table["bundles_to_node_id"][i] for i in range(len(spec.bundles))]
    finally:
        remove_placement_group(group)


def test_a_tp4_replica_lands_inside_one_node(cluster: Any) -> None:
    nodes = _bundle_nodes(placement_for(LayoutConfig(tp=4), CPU))
    assert len(set(nodes)) == 1
    assert nodes[0] in _accelerator_nodes()


def test_tp2_x_pp2_stages_span_the_two_nodes_the_plan_chose(cluster: Any) -> None:
    first, second = _accelerator_nodes()
    planned = PlannedPlacement(rank_nodes=(first, first, second, second))
    spec = placement_for(LayoutConfig(tp=2, pp=2), CPU, planned=planned)
    assert _bundle_nodes(spec) == [first, first, second, second]


def test_an_unplaceable_layout_is_refused_before_anything_is_deployed(
    cluster: Any, tmp_path: Path
) -> None:
    from ray import serve

    from cluster.ray_adapters.serve_control import ServeControl

    config = ModelDeploymentConfig(
        name="too-wide", source="miniature:llama", layout=LayoutConfig(tp=8), accelerator=CPU
    )
    # The engine asks before it publishes or deploys anything (tests/unit/fleet: a refused
    # placement leaves no route); here, that Ray's real resources give the refusal.
    problem = ServeControl().placement_problem(config)
    assert problem is not None and "on one node" in problem
    assert not any(name.startswith("model-too-wide") for name in serve.status().applications)


def test_a_real_tp2_engine_is_placed_on_one_node_and_serves(cluster: Any, tmp_path: Path) -> None:
    """The Kimi miniature (MLA) at TP=2: two bundles on one node, the answer, the start-up
    steps, and the KV cache the engine logged against the policy's count with the latent
    replicated on both ranks (test_engines.py checks MiniMax's split KV heads at TP=2)."""
    from ray import serve
    from ray.serve.llm.openai_api_models import CompletionRequest
    from ray.util.placement_group import placement_group_table

    from cluster.fleet.ports import AppStatus
    from cluster.inventory.local_probe import cpu_amx_tiles
    from cluster.miniature_generator import ensure_miniature
    from cluster.ray_adapters.serve_control import ServeControl
    from domain.app_name import AppName
    from policies.checkpoint.hf_config import load_model_spec
    from policies.inventory import GpuProfile
    from policies.layout import Layout
    from policies.memory import KvCacheDtype, kv_block_tokens, kv_bytes_per_token_per_gpu

    model_dir = ensure_miniature("kimi-k2.5", tmp_path)
    serve.start(http_options={"host": "127.0.0.1", "port": 0})
    control = ServeControl()
    app = AppName("tp2-kimi", 1)
    config = ModelDeploymentConfig(
        name="tp2-kimi",
        source="miniature:kimi-k2.5",
        layout=LayoutConfig(tp=2),
        accelerator=CPU,
        engine={"enforce_eager": True, "max_model_len": 512},
    )
    assert control.placement_problem(config) is None
    started = control.start_deploy(app, config, model_dir)
    deployed = control.wait_deployed(app, started, timeout_s=600)
    try:
        groups = [
            g
            for g in placement_group_table().values()
            if g["state"] == "CREATED"
            and len(g["bundles"]) == 2
            and all(b.get(SLOTS) for b in g["bundles"].values())
        ]
        assert len(groups) == 1, groups
        assert len(set(groups[0]["bundles_to_node_id"].values())) == 1
        assert control.claimed_by(app.app, SLOTS) == {
            next(iter(groups[0]["bundles_to_node_id"].values()))[:12]: 2
        }
        handle = serve.get_deployment_handle(app.deployment, app.app)

        async def ask() -> Any:
            request = CompletionRequest(model="tp2-kimi", prompt="hi", max_tokens=4)
            stream: Any = handle.options(stream=True).completions.remote(request, None)
            async for item in stream:
                return item
            return None

        import asyncio

        reply = asyncio.run(ask())
        assert reply.choices[0].text is not None
        assert control.statuses()[app.app] is AppStatus.RUNNING
        control.warm_up(app, timeout_s=120)
        # Where the start went, from Ray's worker timestamps and vLLM's own log lines.
        report = control.start_report(app, deployed, warm_up_s=0.1)
        steps = report.steps.seconds
        assert steps["weight_load"] is not None and steps["kv_cache"] is not None
        assert steps["compile"] is None, "eager on the CPU"
        spec = load_model_spec(model_dir)
        per_token = kv_bytes_per_token_per_gpu(spec, Layout(tp=2), KvCacheDtype.AUTO)
        # MLA blocks are 16 tokens on the CPU, 128 where the AMX backend runs it.
        block = kv_block_tokens(spec, GpuProfile.cpu_standin(8, amx_tiles=cpu_amx_tiles()))
        space = int(CPU.cpu_kv_cache_space_gib * 2**30)
        logged = report.capacity.kv_cache_tokens
        assert logged == space // (per_token * block) * block, (logged, per_token, block)

        # The gateway's cheap replica count (Serve controller's running table) says what
        # serve.status() says.
        from serve_apps.gateway.serve_deployment import (
            ServeReplicaCounts,
            running_replicas_from_status,
        )

        counts = asyncio.run(ServeReplicaCounts()())
        assert counts[app.app] == 1
        assert asyncio.run(running_replicas_from_status())[app.app] == 1
        assert control.running_replicas()[app.app] == 1
    finally:
        control.delete(app.app)
    assert app.app not in control.statuses()
