"""Builds cache entries on disk for fast unit tests, with the real bookkeeping functions."""

from __future__ import annotations

import os
from pathlib import Path

from cluster.staging.cache_entries import write_entry_manifest, write_staged_marker
from cluster.staging.cache_layout import CacheLayout, entry_name_for
from cluster.staging.manifest import ManifestFile, SourceManifest
from domain.model_source import ModelSource


def hub_manifest(repo_id: str, files: dict[str, int], commit: str = "c" * 40) -> SourceManifest:
    return SourceManifest(
        source=ModelSource.hub(repo_id),
        commit=commit,
        files=tuple(ManifestFile(path, size) for path, size in files.items()),
    )


def make_entry(
    layout: CacheLayout,
    repo_id: str,
    files: dict[str, int],
    *,
    staged: bool = True,
    last_used_epoch_s: float | None = None,
    written: dict[str, int] | None = None,
) -> str:
    """Write an entry whose files hold `written` bytes each (default: their full size)."""
    layout.ensure()
    manifest = hub_manifest(repo_id, files)
    name = entry_name_for(manifest)
    entry_dir = layout.entry_dir(name)
    for path, size in (written or files).items():
        target = entry_dir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"\0" * size)
    write_entry_manifest(entry_dir, manifest)
    if staged:
        write_staged_marker(entry_dir, manifest, node="test-node")
    if last_used_epoch_s is not None:
        stamp = entry_dir / ".switchyard" / "last_used"
        stamp.touch()
        os.utime(stamp, (last_used_epoch_s, last_used_epoch_s))
    return name


def entry_exists(layout: CacheLayout, name: str) -> bool:
    return Path(layout.entry_dir(name)).is_dir()
