"""Prune: temporary files of killed downloads go, unless someone took the entry meanwhile."""

from __future__ import annotations

from pathlib import Path

import pytest
from filelock import FileLock

from cluster.staging import eviction as prune
from cluster.staging.cache_entries import CacheEntry, list_entries
from cluster.staging.cache_layout import CacheLayout
from cluster.staging.integrity import HUB_METADATA_DIR

from .cache_builder import make_entry


def _orphan_download(layout: CacheLayout, name: str) -> Path:
    orphan = layout.entry_dir(name) / HUB_METADATA_DIR / "download" / "w.safetensors.incomplete"
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(b"\0" * 7)
    return orphan


def test_a_killed_downloads_leftovers_are_removed_from_a_staged_entry(tmp_path: Path):
    layout = CacheLayout(tmp_path)
    name = make_entry(layout, "org/m", {"w.safetensors": 10})
    orphan = _orphan_download(layout, name)
    report = prune.prune_cache(layout)
    assert not orphan.exists()
    assert report.freed_bytes >= 7
    assert report.removed_entries == ()


def test_an_entry_locked_after_the_listing_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    layout = CacheLayout(tmp_path)
    name = make_entry(layout, "org/m", {"w.safetensors": 10})
    orphan = _orphan_download(layout, name)
    staging = FileLock(layout.entry_lock(name))

    def list_then_start_staging(listed: CacheLayout) -> list[CacheEntry]:
        entries = list_entries(listed)
        staging.acquire()  # a staging starts between the listing and prune's own lock
        return entries

    monkeypatch.setattr(prune, "list_entries", list_then_start_staging)
    try:
        assert prune.prune_cache(layout).freed_bytes == 0
    finally:
        staging.release()
    assert orphan.exists()
