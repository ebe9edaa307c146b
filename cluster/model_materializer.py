"""From a model source to a local directory vLLM can load, through the staging layer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def staged_model_path(state_dir: Path) -> Callable[[str], Path]:
    """Materialise a source on this node (miniature, local directory or hub download)."""

    def materialize(source_text: str) -> Path:
        from cluster.staging.config import StagingConfig
        from cluster.staging.stage import stage
        from switchyard.model_source import parse_model_source

        config = StagingConfig(cache_dir=state_dir / "cache", reserve_gib=1.0)
        return stage(parse_model_source(source_text), config).path

    return materialize
