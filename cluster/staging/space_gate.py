"""The disk rule, and the one door to a node's cache volume that applies it: judge, evict if
allowed, reserve, all under one lock.

A model is staged on a node only if what is still missing fits: usable = free space on the
cache volume - configured reserve - space promised to other stagings still in progress. The
verdict is computed before the first byte is downloaded. Between the check and the
reservation no other staging can run its own check, so two stagings racing for the last free
space cannot both pass.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cluster.staging.cache_entries import CacheEntry, list_entries
from cluster.staging.cache_layout import CacheLayout
from cluster.staging.eviction import (
    EvictionRefused,
    choose_evictions,
    evict_entry,
    eviction_candidates,
)
from cluster.staging.progress import format_bytes
from cluster.staging.reservations import Reservation, ReservationBook
from cluster.staging.staging_config import StagingConfig
from cluster.staging.staging_errors import InsufficientDiskError

# --- The disk rule


@dataclass(frozen=True)
class DiskVerdict:
    """Whether one model's missing bytes fit on one node's cache volume, with the numbers."""

    node: str
    model: str
    cache_dir: str
    need_bytes: int
    """Bytes of the model not yet on disk (files already complete are not counted)."""
    free_bytes: int
    reserve_bytes: int
    reserved_by_others_bytes: int
    evictable_bytes: int = 0
    """What evicting unprotected least-recently-used models could free; 0 when not allowed."""

    @property
    def usable_bytes(self) -> int:
        return max(0, self.free_bytes - self.reserve_bytes - self.reserved_by_others_bytes)

    @property
    def fits(self) -> bool:
        return self.need_bytes <= self.usable_bytes

    @property
    def fits_with_eviction(self) -> bool:
        return self.need_bytes <= self.usable_bytes + self.evictable_bytes

    @property
    def shortfall_bytes(self) -> int:
        return max(0, self.need_bytes - self.usable_bytes)

    def describe(self) -> str:
        numbers = (
            f"{format_bytes(self.usable_bytes)} usable = {format_bytes(self.free_bytes)} free - "
            f"{format_bytes(self.reserve_bytes)} reserve - "
            f"{format_bytes(self.reserved_by_others_bytes)} promised to other stagings"
        )
        if self.fits:
            return (
                f"node {self.node}: {self.model} needs {format_bytes(self.need_bytes)} more on "
                f"{self.cache_dir}; fits ({numbers})"
            )
        eviction = (
            "; evicting unpinned, not-serving models could free "
            f"{format_bytes(self.evictable_bytes)}"
            if self.evictable_bytes
            else ""
        )
        return (
            f"node {self.node}: {self.model} needs {format_bytes(self.need_bytes)} more on "
            f"{self.cache_dir} but only {numbers}{eviction}"
        )


def judge_disk(
    *,
    node: str,
    model: str,
    cache_dir: str,
    need_bytes: int,
    free_bytes: int,
    reserve_bytes: int,
    reserved_by_others_bytes: int,
    evictable_bytes: int = 0,
) -> DiskVerdict:
    if min(need_bytes, free_bytes, reserve_bytes, reserved_by_others_bytes, evictable_bytes) < 0:
        raise ValueError("byte counts cannot be negative")
    return DiskVerdict(
        node=node,
        model=model,
        cache_dir=cache_dir,
        need_bytes=need_bytes,
        free_bytes=free_bytes,
        reserve_bytes=reserve_bytes,
        reserved_by_others_bytes=reserved_by_others_bytes,
        evictable_bytes=evictable_bytes,
    )


# --- The gate

FreeBytesProbe = Callable[[Path], int]


def disk_free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer can still use on the volume holding `path`."""
    return shutil.disk_usage(path).free


class SpaceGate:
    """Admits stagings onto one node's cache volume."""

    def __init__(
        self,
        layout: CacheLayout,
        config: StagingConfig,
        node: str,
        *,
        free_bytes: FreeBytesProbe = disk_free_bytes,
        book: ReservationBook | None = None,
    ) -> None:
        self._layout = layout
        self._config = config
        self._node = node
        self._free_bytes = free_bytes
        self.book = book or ReservationBook(layout, stale_after_s=config.reservation_stale_after_s)

    def verdict(
        self, *, entry: str | None, model: str, need_bytes: int, protected: frozenset[str]
    ) -> DiskVerdict:
        """The verdict a staging would get now; reserves and deletes nothing (for `plan`)."""
        self._layout.ensure()
        with self.book.transaction() as reservations:
            return self._judge(reservations, entry, model, need_bytes, protected)

    @contextmanager
    def reserve(
        self, *, entry: str, model: str, need_bytes: int, protected: frozenset[str]
    ) -> Iterator[DiskVerdict]:
        """Reserve `need_bytes` for `entry` for the `with` block, evicting LRU entries first
        when allowed and sufficient; raise `InsufficientDiskError` (nothing deleted) otherwise."""
        self._layout.ensure()
        with self.book.transaction() as reservations:
            verdict = self._judge(reservations, entry, model, need_bytes, protected)
            if not verdict.fits and verdict.fits_with_eviction:
                self._evict_for(reservations, entry, verdict.shortfall_bytes, protected)
                verdict = self._judge(reservations, entry, model, need_bytes, protected)
            if not verdict.fits:
                raise InsufficientDiskError(verdict)
            self.book.reserve(reservations, entry, need_bytes)
        try:
            yield verdict
        finally:
            self.book.release(entry)

    def _judge(
        self,
        reservations: list[Reservation],
        entry: str | None,
        model: str,
        need_bytes: int,
        protected: frozenset[str],
    ) -> DiskVerdict:
        evictable = 0
        if self._config.allow_eviction:
            candidates = self._candidates(reservations, entry, protected)
            evictable = sum(item.size_bytes for item in candidates)
        return judge_disk(
            node=self._node,
            model=model,
            cache_dir=str(self._layout.root),
            need_bytes=need_bytes,
            free_bytes=self._free_bytes(self._layout.root),
            reserve_bytes=self._config.reserve_bytes,
            reserved_by_others_bytes=self.book.reserved_by_others(reservations),
            evictable_bytes=evictable,
        )

    def _candidates(
        self, reservations: list[Reservation], entry: str | None, protected: frozenset[str]
    ) -> list[CacheEntry]:
        busy = {item.entry for item in reservations}
        if entry is not None:
            busy.add(entry)
        return eviction_candidates(list_entries(self._layout), protected | busy)

    def _evict_for(
        self,
        reservations: list[Reservation],
        entry: str,
        shortfall_bytes: int,
        protected: frozenset[str],
    ) -> None:
        chosen = choose_evictions(self._candidates(reservations, entry, protected), shortfall_bytes)
        for victim in chosen or []:
            try:
                evict_entry(self._layout, victim.name, protected)
            except EvictionRefused:
                continue  # became busy since it was listed; the verdict is recomputed after
