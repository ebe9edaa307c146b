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
from functools import cached_property

from policies.inventory import NodeInventory
from policies.layout import Layout
from policies.reasons import Reason, ReasonCode
from policies.units import gib


@dataclass(frozen=True)
class Placement:
    groups: tuple[tuple[str, ...], ...]
    """Per TP group (pp x dp of them), the node(s) its GPUs are on."""

    @cached_property
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
    return Placer(nodes, weights_bytes=weights_bytes, cached_on=cached_on).place(layout)


LISTED_NODES = 8
"""A refusal names each node's free GPUs up to this many nodes; beyond, it counts the nodes
of each free/total pair (a 512-node refusal stays one line)."""


class Placer:
    """One pool's nodes as placement reads them, ordered once: admission places every
    candidate layout on the same nodes, and ordering hundreds of nodes for each of
    thousands of candidates was most of a large cluster's plan."""

    def __init__(
        self,
        nodes: Sequence[NodeInventory],
        *,
        weights_bytes: int,
        cached_on: frozenset[str] = frozenset(),
    ) -> None:
        self._nodes = tuple(nodes)
        self._weights_bytes = weights_bytes
        self._cached_on = cached_on
        self._order = sorted(nodes, key=lambda n: (not self._disk_ok(n), -n.free_gpus, n.name))
        self._max_gpus = max(n.gpus for n in nodes)
        size = self._nodes[0].gpus
        self._node_size = size if all(n.gpus == size for n in nodes) else None
        self._whole_free = [n.name for n in self._order if n.free_gpus == n.gpus]
        self._by_name = {n.name: n for n in nodes}
        self._short_of_disk = {n.name for n in nodes if not self._disk_ok(n)}
        # Layouts with the same TP size and group count (pp x dp) land on the same GPUs:
        # thousands of candidates share a few hundred placements.
        self._placed: dict[tuple[int, int], tuple[Placement | None, tuple[Reason, ...]]] = {}
        self._free_listing: str | None = None

    def _disk_ok(self, node: NodeInventory) -> bool:
        return (
            node.storage_id in self._cached_on
            or node.disk_free_bytes is None
            or node.disk_free_bytes >= self._weights_bytes
        )

    def place(self, layout: Layout) -> tuple[Placement | None, tuple[Reason, ...]]:
        """Place the layout's TP groups; the placement or why it cannot be made."""
        groups_needed = layout.pp * layout.dp
        tp = layout.tp
        key = (tp, groups_needed)
        placed = self._placed.get(key)
        if placed is None:
            placed = self._placed[key] = self._place(tp, groups_needed)
        placement, reasons = placed
        if placement is None:
            return None, (
                Reason(
                    ReasonCode.NOT_ENOUGH_GPUS,
                    f"{layout} needs {groups_needed} group(s) of {tp} GPUs on one node each "
                    f"({layout.total_gpus} GPUs); free GPUs per node: {self._free_text()}.",
                ),
            )
        return placement, reasons

    def _place(self, tp: int, groups_needed: int) -> tuple[Placement | None, tuple[Reason, ...]]:
        """`groups_needed` TP groups of `tp` GPUs: the placement and the disk reasons, or
        None when they do not fit on the free GPUs."""
        groups: list[tuple[str, ...]] = []
        if tp <= self._max_gpus:
            for node in self._order:
                if len(groups) == groups_needed:
                    break
                fit = min(node.free_gpus // tp, groups_needed - len(groups))
                groups.extend((node.name,) for _ in range(fit))
        elif self._node_size is not None and tp % self._node_size == 0:
            # TP spans nodes: only whole, fully free nodes of one size can form a group.
            per_group = tp // self._node_size
            free_nodes = self._whole_free
            while len(groups) < groups_needed and len(free_nodes) >= per_group:
                groups.append(tuple(free_nodes[:per_group]))
                free_nodes = free_nodes[per_group:]
        if len(groups) < groups_needed:
            return None, ()
        placement = Placement(groups=tuple(groups))
        if not self._short_of_disk:
            return placement, ()
        reasons = []
        checked: set[str] = set()
        for name in placement.nodes:
            node = self._by_name[name]
            if node.storage_id in checked or name not in self._short_of_disk:
                checked.add(node.storage_id)
                continue
            checked.add(node.storage_id)
            free_bytes = node.disk_free_bytes or 0
            reasons.append(
                Reason(
                    ReasonCode.DISK_INSUFFICIENT,
                    f"weights need {gib(self._weights_bytes):.1f} GiB of disk but node {name} "
                    f"has {gib(free_bytes):.1f} GiB free.",
                )
            )
        return placement, tuple(reasons)

    def _free_text(self) -> str:
        if self._free_listing is None:
            self._free_listing = self._list_free()
        return self._free_listing

    def _list_free(self) -> str:
        if len(self._nodes) <= LISTED_NODES:
            return ", ".join(f"{n.name} {n.free_gpus}/{n.gpus}" for n in self._nodes)
        counts: dict[tuple[int, int], int] = {}
        for n in self._nodes:
            counts[(n.free_gpus, n.gpus)] = counts.get((n.free_gpus, n.gpus), 0) + 1
        return ", ".join(
            f"{count} nodes {free}/{gpus}"
            for (free, gpus), count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        )
