"""From a model source to a local directory vLLM can load, through the staging layer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cluster.staging.config import StagingConfig


def manager_staging_config(state_dir: Path) -> StagingConfig:
    """Where and with which reserve the manager stages weights (shared mode, head's disk)."""
    from cluster.staging.config import StagingConfig

    return StagingConfig(cache_dir=state_dir / "cache", reserve_gib=1.0)


def staged_model_path(state_dir: Path) -> Callable[[str], Path]:
    """Materialise a source on this node (miniature, local directory or hub download)."""

    def materialize(source_text: str) -> Path:
        from cluster.staging.stage import stage
        from domain.model_source import parse_model_source

        config = manager_staging_config(state_dir)
        return stage(parse_model_source(source_text), config).path

    return materialize
