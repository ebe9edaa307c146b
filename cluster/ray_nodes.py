"""`NodePort` on Ray: weights staged onto the node, hardware probed on every node."""

from __future__ import annotations

import tempfile
from pathlib import Path

from cluster.cluster_port import PrefetchReport
from cluster.manager_settings import ManagerSettings
from cluster.node_probe.records import ProbedCluster
from cluster.page_cache import PREFETCH_RESERVE_BYTES, available_memory_bytes, prefetch_weights
from cluster.weight_disk_report import WeightsDiskReport, weights_disk_report
from domain.model_source import SourceKind, parse_model_source


class RayNodes:
    def __init__(self, settings: ManagerSettings) -> None:
        self._settings = settings

    def stage(self, source: str) -> Path:
        from cluster.staging.stage import stage

        return stage(parse_model_source(source), self._settings.staging).path

    def read_config(self, source: str) -> Path:
        parsed = parse_model_source(source)
        if parsed.kind is not SourceKind.HUB:
            return self.stage(source)  # local or generated: nothing to download
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
        from cluster.node_probe.ray_probe import probe_cluster

        settings = self._settings
        return probe_cluster(
            settings.staging.cache_dir,
            settings.inventory,
            standin_resource=settings.accelerator.standin_resource,
            standin_memory_gib=settings.standin_memory_gib,
        )

    def weights_report(self, source: str, probed: ProbedCluster) -> WeightsDiskReport:
        return weights_disk_report(source, probed.facts, self._settings.staging)

    def prefetch(self, model_dir: Path) -> PrefetchReport:
        return prefetch_weights(model_dir, available_memory_bytes(), PREFETCH_RESERVE_BYTES)
