"""Where a layout's TP groups would go on the free GPUs, and whether their disks hold the weights.

Each TP group needs its GPUs on one node (or whole nodes, where TP may span nodes). Groups
go to nodes whose disk can take the weights first, then to the nodes with most free GPUs, so
pipeline stages of one replica share a node when they can. Every distinct storage a used
node stages weights on must hold the full checkpoint once (vLLM reads all shards it needs
from a local path), unless the weights are already there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from policies.inventory import NodeInventory
from policies.layout import Layout
from policies.reasons import Reason, ReasonCode
from policies.units import gib


@dataclass(frozen=True)
class Placement:
    groups: tuple[tuple[str, ...], ...]
    """Per TP group (pp x dp of them), the node(s) its GPUs are on."""

    @property
    def nodes(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for group in self.groups:
            for node in group:
                seen.setdefault(node, None)
        return tuple(seen)


def place(
    layout: Layout,
    nodes: Sequence[NodeInventory],
    *,
    weights_bytes: int,
    cached_on: frozenset[str] = frozenset(),
) -> tuple[Placement | None, tuple[Reason, ...]]:
    """Place the layout's TP groups; returns the placement or why it cannot be made."""

    def disk_ok(node: NodeInventory) -> bool:
        return (
            node.storage_id in cached_on
            or node.disk_free_bytes is None
            or node.disk_free_bytes >= weights_bytes
        )

    order = sorted(nodes, key=lambda n: (not disk_ok(n), -n.free_gpus, n.name))
    groups_needed = layout.pp * layout.dp
    tp = layout.tp
    groups: list[tuple[str, ...]] = []
    if tp <= max(n.gpus for n in nodes):
        for node in order:
            fit = min(node.free_gpus // tp, groups_needed - len(groups))
            groups.extend((node.name,) for _ in range(fit))
    else:
        # TP spans nodes: only whole, fully free nodes of one size can form a group.
        size = nodes[0].gpus
        if all(n.gpus == size for n in nodes) and tp % size == 0:
            per_group = tp // size
            free_nodes = [n.name for n in order if n.free_gpus == n.gpus]
            while len(groups) < groups_needed and len(free_nodes) >= per_group:
                groups.append(tuple(free_nodes[:per_group]))
                free_nodes = free_nodes[per_group:]
    if len(groups) < groups_needed:
        free = ", ".join(f"{n.name} {n.free_gpus}/{n.gpus}" for n in nodes)
        return None, (
            Reason(
                ReasonCode.NOT_ENOUGH_GPUS,
                f"{layout} needs {groups_needed} group(s) of {tp} GPUs on one node each "
                f"({layout.total_gpus} GPUs); free GPUs per node: {free}.",
            ),
        )
    placement = Placement(groups=tuple(groups))
    by_name = {n.name: n for n in nodes}
    reasons = []
    checked: set[str] = set()
    for name in placement.nodes:
        node = by_name[name]
        if node.storage_id in checked or disk_ok(node):
            checked.add(node.storage_id)
            continue
        checked.add(node.storage_id)
        free_bytes = node.disk_free_bytes or 0
        reasons.append(
            Reason(
                ReasonCode.DISK_INSUFFICIENT,
                f"weights need {gib(weights_bytes):.1f} GiB of disk but node {name} has "
                f"{gib(free_bytes):.1f} GiB free.",
            )
        )
    return placement, tuple(reasons)
