"""`switchyard cache prune`: drop what can never be served, keep every staged model.

Removes partial entries nobody is staging (a later staging would resume them, so pruning
trades a resume for disk space), temporary files of killed downloads, and deletes a crash
interrupted. Pinned and protected entries are kept even when partial.
"""

from __future__ import annotations

from dataclasses import dataclass

from filelock import FileLock, Timeout

from cluster.staging.cache_entries import list_entries
from cluster.staging.eviction import EvictionRefused, evict_entry, remove_interrupted_evictions
from cluster.staging.integrity import discard_orphan_downloads
from cluster.staging.layout import CacheLayout
from cluster.staging.states import EntryState


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
