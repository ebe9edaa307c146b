"""`WeightsLocator` for engine replicas: stage on the replica's own node, then pin.

Sent to the replica with its deployment (a small frozen record: the source, the staging
settings, the inventory's overrides and the manifest admission sized), so every node
stages exactly the files the manager judged, into its own cache root.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster.inventory.node_roles import NodeIdentity, cache_dir_for
from cluster.inventory.overrides import NodeOverride
from cluster.inventory.ray_node_entry import identity_of
from cluster.staging.manifest import SourceManifest
from cluster.staging.staging_config import StagingConfig

log = logging.getLogger(__name__)

PIN_PREFIX = "switchyard serves "
"""Reason of the manager's pins: this prefix and the model's source. Hand-set pins
(`switchyard cache pin`) never start with it, so releasing never touches them."""


def pin_reason(source: str) -> str:
    return PIN_PREFIX + source


def node_config(
    staging: StagingConfig, node: NodeIdentity, overrides: tuple[NodeOverride, ...]
) -> StagingConfig:
    """`staging` with this node's cache root."""
    root = cache_dir_for(node, overrides, staging.cache_dir)
    return staging if root == staging.cache_dir else staging.model_copy(update={"cache_dir": root})


@dataclass(frozen=True)
class NodeLocalWeights:
    source: str
    staging: StagingConfig
    overrides: tuple[NodeOverride, ...] = ()
    manifest: SourceManifest | None = None

    def local_path(self) -> Path:
        import ray

        from cluster.staging.node_tasks import node_label
        from cluster.staging.stage import stage_pinned
        from domain.model_source import parse_model_source

        node_id = ray.get_runtime_context().get_node_id()
        entries: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
        entry = next((e for e in entries if e.get("NodeID") == node_id), {"NodeID": node_id})
        node = identity_of(entry)
        config = node_config(self.staging, node, self.overrides)
        label = node_label(node.node_ip, node_id)
        staged = stage_pinned(
            parse_model_source(self.source),
            config,
            pin_reason(self.source),
            manifest=self.manifest,
            node=label,
        )
        if not staged.reused:
            log.info("staged %s on node %s before starting the engine", self.source, label)
        return staged.path
