"""Where a cluster's Prometheus service-discovery file is, and the metrics agents it lists."""

from __future__ import annotations

import json
from pathlib import Path

from cluster.startup.ray_runtime import LOCAL_HEAD_MARKER
from domain.metric_names import RAY_SD_FILE, SD_FILE_NAME

__all__ = ["RAY_SD_FILE", "SD_FILE_NAME", "scrape_targets", "service_discovery_file"]


def service_discovery_file(state_dir: Path) -> Path:
    """The SD file of the head `up` started (Ray writes it into the head's session directory);
    Ray's shared link to the newest session's file when no local head is recorded."""
    marker = state_dir / LOCAL_HEAD_MARKER
    if marker.exists():
        session = json.loads(marker.read_text()).get("session_dir")
        if session:
            return Path(session) / SD_FILE_NAME
    return Path(RAY_SD_FILE)


def scrape_targets(sd_file: Path) -> list[str]:
    """host:port of every node's metrics agent listed in a Prometheus file-SD document."""
    groups = json.loads(sd_file.read_text())
    return [target for group in groups for target in group.get("targets", [])]
