"""What a node's cache holds: each entry's state, size on disk, last use and pin."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from cluster.staging.entry_metadata import read_entry_manifest, read_last_used, read_staged_marker
from cluster.staging.integrity import bytes_on_disk, check_sizes
from cluster.staging.layout import CacheLayout
from cluster.staging.pins import read_pins
from cluster.staging.states import EntryState

# A staging (or an eviction) holds the entry's lock for its whole download (or delete); a
# listing holds it for a moment. Trying this many times, this far apart (about 0.25 s in
# all), tells the two apart.
_STAGING_PROBE_ATTEMPTS = 6
_STAGING_PROBE_INTERVAL_S = 0.05


@dataclass(frozen=True)
class CacheEntry:
    name: str
    path: Path
    state: EntryState
    size_bytes: int
    """On disk now, Switchyard's and huggingface_hub's bookkeeping included."""
    expected_bytes: int | None
    """The manifest's total, when the entry's manifest is readable."""
    source: str | None
    last_used: datetime | None
    pinned: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.path),
            "state": self.state.value,
            "size_bytes": self.size_bytes,
            "expected_bytes": self.expected_bytes,
            "source": self.source,
            "last_used": self.last_used.isoformat() if self.last_used else None,
            "pinned": self.pinned,
        }


def entry_state(layout: CacheLayout, name: str) -> EntryState:
    """STAGING while another process holds the entry's lock; STAGED only when the marker
    matches the manifest and every file still has its size.

    A snapshot, as any listing is: eviction and prune take the entry's lock themselves before
    they touch it.
    """
    entry_dir = layout.entry_dir(name)
    if not entry_dir.is_dir():
        return EntryState.ABSENT
    if being_staged(layout.entry_lock(name)):
        return EntryState.STAGING
    return EntryState.STAGED if is_staged(entry_dir) else EntryState.PARTIAL


def being_staged(lock_path: Path, *, pause: Callable[[float], None] = time.sleep) -> bool:
    """Whether someone holds the entry's lock for longer than a listing would.

    The lock is exclusive only (flock through `filelock`, which has no shared mode on Unix):
    it is taken and dropped at once, so two processes listing at the same moment merely wait
    a few milliseconds for each other instead of seeing each other as a staging.

    Counted in attempts, not in seconds: a process stalled while another listing of it held
    the lock (a garbage collection, a loaded machine) would otherwise find the whole wait
    spent by the stall, fail one attempt and read that listing as a staging.
    """
    lock = FileLock(lock_path)
    for attempt in range(_STAGING_PROBE_ATTEMPTS):
        if attempt:
            pause(_STAGING_PROBE_INTERVAL_S)
        try:
            with lock.acquire(timeout=0):  # one try
                return False
        except Timeout:
            pass
    return True


def is_staged(entry_dir: Path) -> bool:
    manifest = read_entry_manifest(entry_dir)
    marker = read_staged_marker(entry_dir)
    return (
        manifest is not None
        and marker is not None
        and marker.manifest_digest == manifest.digest()
        and not check_sizes(entry_dir, manifest)
    )


def list_entries(layout: CacheLayout) -> list[CacheEntry]:
    pins = read_pins(layout)
    entries = []
    for name in layout.entry_names():
        entry_dir = layout.entry_dir(name)
        manifest = read_entry_manifest(entry_dir)
        entries.append(
            CacheEntry(
                name=name,
                path=entry_dir,
                state=entry_state(layout, name),
                size_bytes=bytes_on_disk(entry_dir),
                expected_bytes=manifest.total_bytes if manifest else None,
                source=str(manifest.source) if manifest else None,
                last_used=read_last_used(entry_dir),
                pinned=name in pins,
            )
        )
    return entries
