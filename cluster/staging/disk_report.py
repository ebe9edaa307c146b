"""The real size of a model's weights and the disk verdict on every node, without staging.

Used by `add --dry-run` / `swap --dry-run`: the manifest is metadata only (one Hub request,
or a directory listing), and each verdict is the one staging would reach on that node now:
need = bytes still missing from the cache, usable = free on the cache volume (probed or
overridden) - reserve - space promised to stagings in progress.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster.inventory.records import NodeFacts
from cluster.staging.space_gate import DiskVerdict
from cluster.staging.staging_config import StagingConfig


@dataclass(frozen=True)
class WeightsDiskReport:
    source: str
    total_bytes: int
    """Every file of the model (weights, config, tokenizer)."""
    weight_bytes: int
    """The safetensors/bin files alone."""
    files: int
    verdicts: tuple[DiskVerdict, ...]

    @property
    def fits_everywhere(self) -> bool:
        return all(v.fits for v in self.verdicts)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "total_bytes": self.total_bytes,
            "weight_bytes": self.weight_bytes,
            "files": self.files,
            "disk": [verdict_json(v) for v in self.verdicts],
        }


def verdict_json(verdict: DiskVerdict) -> dict[str, Any]:
    return {
        "node": verdict.node,
        "cache_dir": verdict.cache_dir,
        "need_bytes": verdict.need_bytes,
        "free_bytes": verdict.free_bytes,
        "reserve_bytes": verdict.reserve_bytes,
        "reserved_by_others_bytes": verdict.reserved_by_others_bytes,
        "usable_bytes": verdict.usable_bytes,
        "fits": verdict.fits,
    }


def weights_disk_report(
    source_text: str, nodes: Sequence[NodeFacts], config: StagingConfig
) -> WeightsDiskReport:
    from cluster.staging.cache_layout import CacheLayout
    from cluster.staging.manifest import fetch_manifest
    from cluster.staging.stage import check_disk
    from domain.model_source import parse_model_source

    source = parse_model_source(source_text)
    miniatures = CacheLayout(config.cache_dir).miniatures_dir
    manifest = fetch_manifest(source, endpoint=config.hub_endpoint, miniature_dir=miniatures)
    verdicts = []
    for node in nodes:
        free = node.disk_free_bytes
        if free is None:
            continue  # the node's disk is unknown: nothing to judge

        def node_free(_: Path, free: int = free) -> int:
            return free

        verdicts.append(check_disk(manifest, config, node=node.name, free_bytes=node_free))
    return WeightsDiskReport(
        source=source_text,
        total_bytes=manifest.total_bytes,
        weight_bytes=manifest.weight_bytes,
        files=manifest.file_count,
        verdicts=tuple(verdicts),
    )
