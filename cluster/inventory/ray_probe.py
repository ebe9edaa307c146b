"""Ray wiring: one probe pinned to every alive node (a task, or a call to the node's agent),
results gathered in node order."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cluster.inventory.local_probe import probe_this_node
from cluster.inventory.node_roles import cache_dir_for
from cluster.inventory.overrides import (
    InventoryConfig,
    apply_overrides,
    gpu_count_warnings,
    unmatched,
)
from cluster.inventory.ray_node_entry import identity_of
from cluster.inventory.records import NodeProbe, ProbedCluster
from serve_apps.internals import available_resources_per_node

if TYPE_CHECKING:
    from cluster.ray_adapters.node_agents import NodeAgents


def build_probe_task() -> Any:
    """`probe_this_node` as a Ray task: no CPU (it must run even on a full node), no retry."""
    import ray

    function: Callable[..., NodeProbe] = probe_this_node
    return ray.remote(num_cpus=0, max_retries=0)(function)


def probe_cluster(
    cache_dir: Path,
    config: InventoryConfig,
    *,
    standin_resource: str | None,
    standin_memory_gib: float,
    agents: NodeAgents | None = None,
) -> ProbedCluster:
    """Every alive node probed on itself (on `agents` when given, else by a task each), then
    the operator's overrides applied."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes: list[dict[str, Any]] = [n for n in ray.nodes() if n["Alive"]]  # type: ignore[no-untyped-call]
    # Built only where it is used: the manager probes on its agents at every operation.
    task: Any = build_probe_task() if agents is None else None
    pending = []
    for node in sorted(nodes, key=lambda n: str(n["NodeID"])):
        resources = node.get("Resources", {})
        identity = identity_of(node)
        slots = int(resources.get(standin_resource, 0)) if standin_resource else 0
        kinds = [
            k.removeprefix("accelerator_type:")
            for k in resources
            if k.startswith("accelerator_type:")
        ]
        arguments: dict[str, Any] = dict(
            node_id=identity.node_id,
            node_ip=identity.node_ip,
            cache_dir=str(cache_dir_for(identity, config.overrides, cache_dir)),
            standin_slots=slots,
            labels=identity.labels,
            ray_gpus=int(resources.get("GPU", 0)),
            ray_gpu_kind=kinds[0] if kinds else None,
        )
        if agents is not None:
            ref = agents.submit(node["NodeID"], probe_this_node, **arguments)
        else:
            ref = task.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            ).remote(**arguments)
        pending.append((node, ref))
    probes: list[NodeProbe] = []
    problems: list[str] = []
    for node, ref in pending:
        try:
            probes.append(ray.get(ref, timeout=config.probe_timeout_s))
        except Exception as exc:
            if agents is not None:
                agents.failed(str(node["NodeID"]), exc)
            # A node that cannot answer is left out of admission rather than guessed at.
            problems.append(f"node {node['NodeID'][:12]}: probe failed: {exc}".splitlines()[0])
    problems += [f"override {s} matches no node" for s in unmatched(config.overrides, probes)]
    facts = tuple(
        apply_overrides(p, config.overrides, standin_memory_gib=standin_memory_gib) for p in probes
    )
    problems += gpu_count_warnings(facts)
    available = available_resources_per_node()
    totals = {str(n["NodeID"]): dict(n.get("Resources", {})) for n in nodes}
    return ProbedCluster(
        facts=facts, available=dict(available), problems=tuple(problems), totals=totals
    )
