"""Space promised to stagings in progress, so two of them cannot both pass the disk check.

The book is a JSON file read and rewritten only while holding the cache's ledger lock. A
reservation promises what its staging still has to write: the bytes it needed at the start
minus what has landed in its entry since, so a half-done download holds back only the other
half. A reservation whose process died (same host: pid gone or reused) or, on a shared cache,
whose host stopped refreshing it, is dropped the next time anyone reads the book.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from filelock import FileLock

from cluster.atomic_file import atomic_write_text
from cluster.staging.cache_layout import CacheLayout
from cluster.staging.integrity import bytes_on_disk


@dataclass(frozen=True)
class Reservation:
    entry: str
    host: str
    pid: int
    pid_started: str
    """The process's start time as the kernel reports it; tells a reused pid from its owner."""
    need_bytes: int
    on_disk_at_start_bytes: int
    updated_at: float
    """Wall-clock seconds; refreshed while the staging runs so other hosts see it is alive."""


@dataclass(frozen=True)
class Holder:
    """Who is reserving: this process on this host, by default."""

    host: str
    pid: int
    pid_started: str

    @classmethod
    def current(cls) -> Holder:
        pid = os.getpid()
        return cls(host=socket.gethostname(), pid=pid, pid_started=process_start_marker(pid))

    def owns(self, reservation: Reservation) -> bool:
        return (reservation.host, reservation.pid, reservation.pid_started) == (
            self.host,
            self.pid,
            self.pid_started,
        )


def process_start_marker(pid: int) -> str:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks); '' where /proc is missing."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # The command name (field 2) may contain spaces; fields after it start past the last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else ""


def is_alive(reservation: Reservation, *, host: str, now: float, stale_after_s: float) -> bool:
    if reservation.host != host:
        return now - reservation.updated_at < stale_after_s
    try:
        os.kill(reservation.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by another user
    return process_start_marker(reservation.pid) == reservation.pid_started


def outstanding_bytes(layout: CacheLayout, reservation: Reservation) -> int:
    """What the reservation's staging still has to write."""
    written = (
        bytes_on_disk(layout.entry_dir(reservation.entry)) - reservation.on_disk_at_start_bytes
    )
    return max(0, reservation.need_bytes - max(0, written))


class ReservationBook:
    """The cache's reservations. Every read-modify-write goes through `transaction()`."""

    def __init__(
        self,
        layout: CacheLayout,
        *,
        stale_after_s: float,
        lock_timeout_s: float = 600.0,
        holder: Holder | None = None,
    ) -> None:
        self._layout = layout
        self._stale_after_s = stale_after_s
        self._lock_timeout_s = lock_timeout_s
        self.holder = holder or Holder.current()

    @contextmanager
    def transaction(self) -> Iterator[list[Reservation]]:
        """Hold the ledger lock; yield the live reservations as a list to edit; save it.

        The gate keeps the lock while it evicts (a delete of a few hundred GB), hence the
        generous default timeout.
        """
        with FileLock(self._layout.ledger_lock, timeout=self._lock_timeout_s):
            reservations = self._load_live()
            yield reservations
            self._save(reservations)

    def reserved_by_others(self, reservations: list[Reservation]) -> int:
        return sum(
            outstanding_bytes(self._layout, item)
            for item in reservations
            if not self.holder.owns(item)
        )

    def reserve(self, reservations: list[Reservation], entry: str, need_bytes: int) -> Reservation:
        """Add this holder's reservation for `entry` to the list (inside a transaction)."""
        reservation = Reservation(
            entry=entry,
            host=self.holder.host,
            pid=self.holder.pid,
            pid_started=self.holder.pid_started,
            need_bytes=need_bytes,
            on_disk_at_start_bytes=bytes_on_disk(self._layout.entry_dir(entry)),
            updated_at=time.time(),
        )
        reservations[:] = [item for item in reservations if not self._is_mine(item, entry)]
        reservations.append(reservation)
        return reservation

    def refresh(self, entry: str) -> None:
        with self.transaction() as reservations:
            reservations[:] = [
                replace(item, updated_at=time.time()) if self._is_mine(item, entry) else item
                for item in reservations
            ]

    def release(self, entry: str) -> None:
        with self.transaction() as reservations:
            reservations[:] = [item for item in reservations if not self._is_mine(item, entry)]

    def live(self) -> list[Reservation]:
        with self.transaction() as reservations:
            return list(reservations)

    def _is_mine(self, item: Reservation, entry: str) -> bool:
        return item.entry == entry and self.holder.owns(item)

    def _load_live(self) -> list[Reservation]:
        try:
            raw = json.loads(self._layout.reservations_file.read_text())
            stored = [Reservation(**item) for item in raw]
        except FileNotFoundError:
            return []
        except (ValueError, TypeError):
            # A corrupt book promises nothing; the next save rewrites it whole.
            return []
        now = time.time()
        host = self.holder.host
        return [
            item
            for item in stored
            if is_alive(item, host=host, now=now, stale_after_s=self._stale_after_s)
        ]

    def _save(self, reservations: list[Reservation]) -> None:
        atomic_write_text(
            self._layout.reservations_file, json.dumps([asdict(item) for item in reservations])
        )
