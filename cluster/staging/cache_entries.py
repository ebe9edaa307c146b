"""What a node's cache holds, entry by entry: its lifecycle state, Switchyard's bookkeeping
inside it, the pins that keep it, and the listing of every entry with its size on disk.

The staged marker is written last, atomically, and only after every file was verified; its
absence is what makes an entry PARTIAL. It records the manifest digest, so a marker left by
another revision or another file list never vouches for this one.

Pins keep entries on disk whatever eviction wants: staged for a pending swap, or pinned by
ops. The manager passes the names it protects (serving models, the NEW model of a swap)
directly; the pins file is how the CLI, and anything outside the manager, learns about pins.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from cluster.atomic_file import atomic_write_text
from cluster.staging.cache_layout import CacheLayout, check_entry_name
from cluster.staging.integrity import bytes_on_disk, check_sizes
from cluster.staging.manifest import SourceManifest

# --- The lifecycle of one entry


class EntryState(StrEnum):
    """Where a cache entry stands. Only STAGED entries are ever handed to vLLM.

    ABSENT -> STAGING -> STAGED, or STAGING -> PARTIAL when the download stops (killed,
    network gone, integrity check failed). A PARTIAL entry becomes STAGING again on the next
    `stage()` of the same model, which keeps every complete file already on disk. Eviction
    turns PARTIAL or STAGED back into ABSENT.
    """

    ABSENT = "absent"
    """Nothing on disk."""
    STAGING = "staging"
    """A live process holds the entry's lock and is downloading or verifying it."""
    PARTIAL = "partial"
    """Some files are on disk but no staged marker: never served, resumable."""
    STAGED = "staged"
    """Every file is present and verified; the staged marker was written last."""


# --- Bookkeeping inside one model directory: its manifest, staged marker, last use

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


# --- Pins

_LOCK_TIMEOUT_S = 120.0


def read_pins(layout: CacheLayout) -> frozenset[str]:
    try:
        data = json.loads(layout.pins_file.read_text())
    except (OSError, ValueError):
        return frozenset()
    if not isinstance(data, dict):
        return frozenset()
    return frozenset(str(name) for name in data)


def pin(layout: CacheLayout, name: str, reason: str) -> None:
    check_entry_name(name)
    with FileLock(layout.ledger_lock, timeout=_LOCK_TIMEOUT_S):
        pins = _read_map(layout)
        pins[name] = reason
        atomic_write_text(layout.pins_file, json.dumps(pins, sort_keys=True))


def unpin(layout: CacheLayout, name: str) -> bool:
    """Remove a pin; returns whether there was one."""
    with FileLock(layout.ledger_lock, timeout=_LOCK_TIMEOUT_S):
        pins = _read_map(layout)
        existed = pins.pop(name, None) is not None
        atomic_write_text(layout.pins_file, json.dumps(pins, sort_keys=True))
    return existed


def release_pins(layout: CacheLayout, prefix: str, keep: frozenset[str]) -> list[str]:
    """Remove the pins whose reason is `prefix` + an owner not in `keep` (the manager's pins
    of apps that no longer exist); the entry names unpinned. Pins set by hand never carry
    the manager's prefix, so they stay."""
    if not layout.pins_file.exists():
        return []
    with FileLock(layout.ledger_lock, timeout=_LOCK_TIMEOUT_S):
        pins = _read_map(layout)
        released = [
            name
            for name, reason in pins.items()
            if reason.startswith(prefix) and reason.removeprefix(prefix) not in keep
        ]
        if released:
            for name in released:
                del pins[name]
            atomic_write_text(layout.pins_file, json.dumps(pins, sort_keys=True))
    return sorted(released)


def _read_map(layout: CacheLayout) -> dict[str, str]:
    try:
        data = json.loads(layout.pins_file.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


# --- The listing

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
