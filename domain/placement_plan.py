"""From admission's placement of a replica to what its placement group asks Ray for (pure).

Admission places each pipeline stage's TP group on nodes with free GPUs (policies/placement.py)
and judges the layout on one GPU kind. The deployer has to get the same: a replica whose
ranks span nodes is pinned, rank by rank, to the nodes admission chose (Ray would otherwise
pack it where it likes, or refuse it outright under STRICT_PACK), and every replica asks for
the GPU kind admission planned with, where Ray labels the nodes with one.

A replica on one node is not pinned to a node: any node of the planned kind with the free GPUs
serves it the same, and pinning would put every replica of `replicas: N` on one node.
"""

from __future__ import annotations

from collections.abc import Mapping

from domain.deployment_config import LayoutConfig, PlannedPlacement


def planned_placement(
    layout: LayoutConfig,
    replicas: int,
    groups: tuple[tuple[str, ...], ...],
    node_ids: Mapping[str, str],
    accelerator_types: Mapping[str, str | None],
) -> PlannedPlacement | str:
    """The placement to deploy, or why admission's placement cannot be deployed as planned.

    `groups`: admission's TP groups of one replica, stage by stage, as node names;
    `node_ids`: Ray's full node id by name; `accelerator_types`: Ray's accelerator type of
    each node by name (None where it has none)."""
    nodes = list(dict.fromkeys(n for group in groups for n in group))
    kinds = {accelerator_types.get(n) for n in nodes}
    kind = kinds.pop() if len(kinds) == 1 else None
    if len(nodes) <= 1:
        return PlannedPlacement(accelerator_type=kind)
    if replicas > 1:
        return (
            f"not_deployable: {layout} places one replica on {len(nodes)} nodes "
            f"({', '.join(nodes)}), and its ranks are pinned to them; replicas: {replicas} "
            "would pin every copy to the same GPUs. Deploy one replica per model, or a layout "
            "that fits on one node"
        )
    if len(groups) != layout.pp or any(layout.tp % len(g) for g in groups):
        return f"not_deployable: admission's placement {groups} does not match {layout}"
    missing = [n for n in nodes if n not in node_ids]
    if missing:
        return f"not_deployable: nodes {missing} of admission's placement are gone"
    ranks: list[str] = []
    for group in groups:
        # A TP group on several whole nodes (TP across nodes): its ranks split evenly.
        per_node = layout.tp // len(group)
        ranks.extend(node_ids[n] for n in group for _ in range(per_node))
    return PlannedPlacement(rank_nodes=tuple(ranks), accelerator_type=kind)
