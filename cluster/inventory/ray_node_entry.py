"""A node as Ray lists it (one `ray.nodes()` entry), parsed once into a `NodeIdentity`.

Apart from node_roles.py because telling the head apart takes a private Ray resource name
(serve_apps/internals.py), which the fleet core, reading only `NodeIdentity`, never needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cluster.inventory.node_roles import NodeIdentity
from serve_apps.internals import is_head_node


def identity_of(entry: Mapping[str, Any]) -> NodeIdentity:
    """A `ray.nodes()` entry as a NodeIdentity."""
    labels = tuple(sorted((str(k), str(v)) for k, v in (entry.get("Labels") or {}).items()))
    return NodeIdentity(
        node_id=str(entry.get("NodeID", "")),
        node_ip=str(entry.get("NodeManagerAddress", "")),
        labels=labels,
        hostname=str(entry.get("NodeManagerHostname", "")),
        is_head=is_head_node(entry),
    )
