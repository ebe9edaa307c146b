"""`ray.nodes()` entries as Ray returns them, for unit tests of code that reads them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from serve_apps.internals import HEAD_NODE_RESOURCE

# The head's id sorts after the others: "head first" is then not merely "by id".
HEAD = "f3" * 28
NODE_A = "1a" * 28
NODE_B = "2b" * 28


def ray_node(
    node_id: str,
    ip: str,
    *,
    head: bool = False,
    alive: bool = True,
    labels: Mapping[str, str] | None = None,
    resources: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """One `ray.nodes()` entry; the head offers Ray's head resource."""
    offered = {"CPU": 4.0, f"node:{ip}": 1.0, **(resources or {})}
    if head:
        offered[HEAD_NODE_RESOURCE] = 1.0
    return {
        "NodeID": node_id,
        "Alive": alive,
        "NodeManagerAddress": ip,
        "NodeManagerHostname": f"box-{ip.rsplit('.', 1)[-1]}",
        "Resources": offered,
        "Labels": {"ray.io/node-id": node_id, **(labels or {})},
    }
