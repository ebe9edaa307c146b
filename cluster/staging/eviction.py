"""Making room: which cached models may go, in which order, and removing one safely; and
`switchyard cache prune`, which drops what can never be served.

Rules: never a protected entry (serving, or staged for a pending swap: the manager passes
these), never a pinned one, never one being staged; least recently used first; and only if
the chosen entries together free enough, so a refusal deletes nothing.

Pruning removes partial entries nobody is staging (a later staging would resume them, so
pruning trades a resume for disk space), temporary files of killed downloads, and deletes a
crash interrupted. Pinned and protected entries are kept even when partial; every staged
model is kept.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock, Timeout

from cluster.staging.cache_entries import CacheEntry, EntryState, list_entries, read_pins
from cluster.staging.cache_layout import CacheLayout
from cluster.staging.integrity import bytes_on_disk, discard_orphan_downloads
from cluster.staging.staging_errors import StagingError

_NEVER_USED = datetime.min.replace(tzinfo=UTC)
_EVICTING_PREFIX = ".evicting-"
# Listing takes the entry's lock for a moment; a staging holds it for the whole download.
# Waiting this long tells the two apart.
_BUSY_WAIT_S = 2.0


class EvictionRefused(StagingError):
    """The entry is protected, pinned or being staged; nothing was deleted."""


def eviction_candidates(
    entries: Iterable[CacheEntry], protected: frozenset[str]
) -> list[CacheEntry]:
    """Entries that may be evicted, least recently used first (never-used partials first)."""
    allowed = [
        entry
        for entry in entries
        if entry.name not in protected
        and not entry.pinned
        and entry.state in (EntryState.STAGED, EntryState.PARTIAL)
    ]
    return sorted(allowed, key=lambda entry: (entry.last_used or _NEVER_USED, entry.name))


def choose_evictions(candidates: Sequence[CacheEntry], need_bytes: int) -> list[CacheEntry] | None:
    """The shortest LRU prefix of `candidates` that frees `need_bytes`; None if all of them
    together would not, because deleting models and still refusing helps nobody."""
    if need_bytes <= 0:
        return []
    chosen: list[CacheEntry] = []
    freed = 0
    for entry in candidates:
        chosen.append(entry)
        freed += entry.size_bytes
        if freed >= need_bytes:
            return chosen
    return None


def evict_entry(layout: CacheLayout, name: str, protected: frozenset[str]) -> int:
    """Delete one entry; returns the bytes freed. Refuses protected, pinned or busy entries."""
    if name in protected:
        raise EvictionRefused(f"cache entry {name} is serving or staged for a swap; not evicted")
    if name in read_pins(layout):
        raise EvictionRefused(f"cache entry {name} is pinned; unpin it first")
    entry_dir = layout.entry_dir(name)
    if not entry_dir.is_dir():
        raise EvictionRefused(f"cache entry {name} does not exist in {layout.models_dir}")
    try:
        held = FileLock(layout.entry_lock(name)).acquire(timeout=_BUSY_WAIT_S)
    except Timeout:
        raise EvictionRefused(
            f"cache entry {name} is being staged right now; not evicted"
        ) from None
    with held:
        return _delete_entry(layout, name, entry_dir)


def _delete_entry(layout: CacheLayout, name: str, entry_dir: Path) -> int:
    """Runs while holding the entry's lock."""
    if not entry_dir.is_dir():
        return 0  # another process evicted it while we waited for the lock
    freed = bytes_on_disk(entry_dir)
    # Rename first: a crash halfway through the delete leaves a hidden folder that is no
    # longer an entry (and that `prune` removes), never a half-deleted model that looks whole.
    doomed = layout.models_dir / f"{_EVICTING_PREFIX}{name}.{os.getpid()}"
    entry_dir.rename(doomed)
    shutil.rmtree(doomed, ignore_errors=True)
    return freed


def remove_interrupted_evictions(layout: CacheLayout) -> int:
    """Finish deletes a crash interrupted; returns the bytes freed."""
    freed = 0
    if not layout.models_dir.is_dir():
        return 0
    for path in layout.models_dir.iterdir():
        if path.name.startswith(_EVICTING_PREFIX) and path.is_dir():
            freed += bytes_on_disk(path)
            shutil.rmtree(path, ignore_errors=True)
    return freed


# --- Pruning


@dataclass(frozen=True)
class PruneReport:
    removed_entries: tuple[str, ...]
    freed_bytes: int


def prune_cache(layout: CacheLayout, protected: frozenset[str] = frozenset()) -> PruneReport:
    freed = remove_interrupted_evictions(layout)
    removed: list[str] = []
    for entry in list_entries(layout):
        if entry.state is EntryState.PARTIAL and not entry.pinned and entry.name not in protected:
            try:
                freed += evict_entry(layout, entry.name, protected)
                removed.append(entry.name)
            except EvictionRefused:
                continue  # someone started staging it since the listing
        elif entry.state is EntryState.STAGED:
            try:
                held = FileLock(layout.entry_lock(entry.name)).acquire(timeout=0)  # one try
            except Timeout:
                continue  # someone is staging it again since the listing
            with held:
                freed += discard_orphan_downloads(entry.path)
    return PruneReport(removed_entries=tuple(removed), freed_bytes=freed)
