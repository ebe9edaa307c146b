"""What the inventory says of one node beyond its hardware: its cache root and its roles.

Resolved from what Ray knows of a node (its `ray.nodes()` entry, parsed once by
`ray_node_entry.identity_of`) and the operator's overrides, so the manager, the probe and a
replica on the node reach the same answer without asking each other. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cluster.inventory.overrides import NodeOverride

ROLE_LABEL = "switchyard.io/role"
"""The Ray node label naming a node's roles (`ray start --labels switchyard.io/role=ingress`)."""
INGRESS_ROLE = "ingress"


@dataclass(frozen=True)
class NodeIdentity:
    """How overrides can name a node: the fields `NodeOverride.matches` reads."""

    node_id: str
    node_ip: str
    labels: tuple[tuple[str, str], ...] = ()
    hostname: str = ""
    is_head: bool = False


def cache_dir_for(node: NodeIdentity, overrides: Iterable[NodeOverride], default: Path) -> Path:
    """The node's cache root: the last matching override that sets one, else `default`."""
    chosen = default
    for override in overrides:
        if override.cache_dir is not None and override.matches(node):
            chosen = override.cache_dir
    return chosen


def is_ingress(node: NodeIdentity, overrides: Iterable[NodeOverride]) -> bool:
    """The head, and nodes labelled `switchyard.io/role=ingress` (the label may list
    several roles separated by `.`), unless the last matching override says otherwise."""
    roles = dict(node.labels).get(ROLE_LABEL, "")
    chosen = node.is_head or INGRESS_ROLE in roles.split(".")
    for override in overrides:
        if override.ingress is not None and override.matches(node):
            chosen = override.ingress
    return chosen
