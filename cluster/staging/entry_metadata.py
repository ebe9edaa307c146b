"""Switchyard's bookkeeping inside one model directory: its manifest, staged marker, last use.

The staged marker is written last, atomically, and only after every file was verified; its
absence is what makes an entry PARTIAL. It records the manifest digest, so a marker left by
another revision or another file list never vouches for this one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cluster.atomic_file import atomic_write_text
from cluster.staging.manifest import SourceManifest

METADATA_DIR = ".switchyard"


@dataclass(frozen=True)
class StagedMarker:
    """What the staged marker says: which manifest was verified, where and when."""

    manifest_digest: str
    total_bytes: int
    node: str
    staged_at: datetime


def _metadata_dir(entry_dir: Path) -> Path:
    return entry_dir / METADATA_DIR


def write_entry_manifest(entry_dir: Path, manifest: SourceManifest) -> None:
    atomic_write_text(_metadata_dir(entry_dir) / "manifest.json", json.dumps(manifest.to_json()))


def read_entry_manifest(entry_dir: Path) -> SourceManifest | None:
    try:
        data = json.loads((_metadata_dir(entry_dir) / "manifest.json").read_text())
        return SourceManifest.from_json(data)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_staged_marker(entry_dir: Path, manifest: SourceManifest, node: str) -> StagedMarker:
    marker = StagedMarker(
        manifest_digest=manifest.digest(),
        total_bytes=manifest.total_bytes,
        node=node,
        staged_at=datetime.now(UTC),
    )
    payload = {
        "manifest_digest": marker.manifest_digest,
        "total_bytes": marker.total_bytes,
        "node": marker.node,
        "staged_at": marker.staged_at.isoformat(),
    }
    atomic_write_text(_metadata_dir(entry_dir) / "staged.json", json.dumps(payload))
    return marker


def read_staged_marker(entry_dir: Path) -> StagedMarker | None:
    try:
        data = json.loads((_metadata_dir(entry_dir) / "staged.json").read_text())
        return StagedMarker(
            manifest_digest=str(data["manifest_digest"]),
            total_bytes=int(data["total_bytes"]),
            node=str(data["node"]),
            staged_at=datetime.fromisoformat(str(data["staged_at"])),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def clear_staged_marker(entry_dir: Path) -> None:
    (_metadata_dir(entry_dir) / "staged.json").unlink(missing_ok=True)


def touch_last_used(entry_dir: Path) -> None:
    stamp = _metadata_dir(entry_dir) / "last_used"
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.touch()
    os.utime(stamp)


def read_last_used(entry_dir: Path) -> datetime | None:
    try:
        return datetime.fromtimestamp((_metadata_dir(entry_dir) / "last_used").stat().st_mtime, UTC)
    except OSError:
        return None
