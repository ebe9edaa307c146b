"""`NodePort` on Ray: weights staged on every node that may host a replica, hardware probed
on every node.

Which nodes: every alive node that offers the fleet's accelerator (the stand-in resource on CPU
clusters, `GPU` otherwise), since Ray, not the manager, picks a replica's node. Each of them
judges its own disk before any downloads (`stage_across_nodes`), so a node that cannot take the
weights refuses the operation, by name, before anything is drained. A replica still looks on its
own node before vLLM starts (`staging/replica_weights.py`): a node that joined after staging
gets the weights then.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cluster.fleet.manager_settings import ManagerSettings
from cluster.fleet.ports import NodeStaged, NodeStageOutcome, PrefetchReport, StagedWeights
from cluster.inventory.node_roles import NodeIdentity
from cluster.inventory.ray_node_entry import identity_of
from cluster.inventory.records import ProbedCluster
from cluster.ray_adapters.node_agents import NodeAgents
from cluster.staging.disk_report import WeightsDiskReport, weights_disk_report
from cluster.staging.manifest import SourceManifest
from cluster.staging.page_cache import (
    PREFETCH_RESERVE_BYTES,
    available_memory_bytes,
    prefetch_weights,
)
from cluster.staging.replica_weights import PIN_PREFIX, NodeLocalWeights, node_config, pin_reason
from cluster.staging.staging_config import StagingConfig
from domain.model_source import SourceKind, parse_model_source
from serve_apps.engine.weights_locator import WeightsLocator

log = logging.getLogger(__name__)


def weight_nodes(entries: Sequence[Mapping[str, Any]], resource: str) -> list[NodeIdentity]:
    """The alive nodes offering `resource` (the head first); the head alone when none does
    (a cluster without accelerators, whose engines run wherever Ray puts them)."""
    alive = [e for e in entries if e.get("Alive", True)]
    offering = [e for e in alive if float((e.get("Resources") or {}).get(resource, 0)) > 0]
    chosen = [identity_of(e) for e in offering]
    if not chosen:
        every = [identity_of(e) for e in alive]
        chosen = [n for n in every if n.is_head] or every[:1]
    return sorted(chosen, key=lambda n: (not n.is_head, n.node_id))


class RayNodes:
    def __init__(self, settings: ManagerSettings) -> None:
        self._settings = settings
        self._manifests: dict[str, SourceManifest] = {}
        # Per-node work runs on one long-lived process per node (see node_agents.py).
        self._agents = NodeAgents()

    def stage(self, source: str) -> StagedWeights:
        import ray

        entries: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
        nodes = weight_nodes(entries, self._settings.accelerator_resource)
        here = str(ray.get_runtime_context().get_node_id())
        configs = self._configs(nodes)
        if [n.node_id for n in nodes] == [here]:
            staged = self._stage_here(source, configs[here], nodes[0])
            return StagedWeights(staged.path, (staged,))
        return self._stage_on(source, nodes, configs, here)

    def _stage_here(self, source: str, config: StagingConfig, node: NodeIdentity) -> NodeStaged:
        """One node, the manager's own: staged in this process (no task to schedule)."""
        from cluster.staging.node_tasks import node_label
        from cluster.staging.stage import stage_pinned

        staged = stage_pinned(parse_model_source(source), config, pin_reason(source))
        self._manifests[source] = staged.manifest
        return NodeStaged(
            node_label(node.node_ip, node.node_id),
            NodeStageOutcome.of(staged.reused, shared=False),
            staged.downloaded_bytes,
            staged.path,
        )

    def _configs(self, nodes: Sequence[NodeIdentity]) -> dict[str, StagingConfig]:
        """Each node's staging settings (its own cache root where the inventory gives one)."""
        settings = self._settings
        return {
            n.node_id: node_config(settings.staging, n, settings.inventory.overrides) for n in nodes
        }

    def _stage_on(
        self,
        source: str,
        nodes: Sequence[NodeIdentity],
        configs: Mapping[str, StagingConfig],
        here: str,
    ) -> StagedWeights:
        from cluster.staging.node_tasks import stage_across_nodes

        staged = stage_across_nodes(
            parse_model_source(source),
            self._settings.staging,
            [n.node_id for n in nodes],
            node_configs=configs,
            pin_reason=pin_reason(source),
            agents=self._agents,
        )
        self._manifests[source] = staged.manifest
        outcomes = []
        for item in staged.nodes:
            assert item.staged is not None  # stage_across_nodes raised otherwise
            outcome = NodeStageOutcome.of(item.staged.reused, shared=item.shared_with is not None)
            outcomes.append(
                NodeStaged(item.node, outcome, item.staged.downloaded_bytes, item.staged.path)
            )
        local = staged.path_on(here)
        # The manager reads the config from its own node's copy; a head that hosts no
        # engine has none, and reads the config alone.
        model_dir = local if local is not None else self.read_config(source)
        return StagedWeights(model_dir, tuple(outcomes))

    def locator(self, source: str) -> WeightsLocator | None:
        settings = self._settings
        return NodeLocalWeights(
            source, settings.staging, settings.inventory.overrides, self._manifests.get(source)
        )

    def release(self, serving: frozenset[str]) -> None:
        import ray

        from cluster.staging.node_tasks import release_across_nodes

        entries: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
        nodes = [identity_of(e) for e in entries if e.get("Alive", True)]
        configs = self._configs(nodes)
        released = release_across_nodes(
            configs, [n.node_id for n in nodes], PIN_PREFIX, frozenset(serving), self._agents
        )
        for node, names in released.items():
            log.info("node %s: unpinned %s", node, ", ".join(names))

    def read_config(self, source: str) -> Path:
        parsed = parse_model_source(source)
        if parsed.kind is not SourceKind.HUB:
            # Local or generated: nothing to download, on this node only.
            from cluster.staging.stage import stage

            return stage(parsed, self._settings.staging).path
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError

        target = Path(tempfile.mkdtemp(prefix="switchyard-config-"))
        for name in ("config.json", "model.safetensors.index.json"):
            try:
                hf_hub_download(
                    parsed.repo_id or "", name, revision=parsed.revision, local_dir=target
                )
            except EntryNotFoundError:
                if name == "config.json":
                    raise
        return target

    def probe(self) -> ProbedCluster:
        """One probe task per node, then the operator's overrides."""
        from cluster.inventory.ray_probe import probe_cluster

        settings = self._settings
        return probe_cluster(
            settings.staging.cache_dir,
            settings.inventory,
            standin_resource=settings.accelerator.standin_resource,
            standin_memory_gib=settings.standin_memory_gib,
            agents=self._agents,
        )

    def weights_report(self, source: str, probed: ProbedCluster) -> WeightsDiskReport:
        # The nodes `stage` would write to, as `weight_nodes` picks them: those with an
        # accelerator (not a fault-tolerant head, which holds none), or all when none has.
        holding = [f for f in probed.facts if f.accelerator != "none"] or list(probed.facts)
        return weights_disk_report(source, holding, self._settings.staging)

    def prefetch(self, model_dir: Path) -> PrefetchReport:
        return prefetch_weights(model_dir, available_memory_bytes(), PREFETCH_RESERVE_BYTES)
