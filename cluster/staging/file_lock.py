"""Advisory locks between processes on one node (and across NFSv4 clients, where flock is
mapped to POSIX locks). The kernel drops a lock when its holder dies, so a killed staging
never leaves a lock behind."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_POLL_S = 0.05


class LockTimeout(TimeoutError):
    """Another process held the lock for longer than the caller was willing to wait."""


@contextmanager
def exclusive_lock(path: Path, timeout_s: float | None = None) -> Iterator[None]:
    """Hold an exclusive flock on `path` (created if missing) for the `with` block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() >= deadline:
                    raise LockTimeout(f"{path} stayed locked for {timeout_s:.0f} s") from None
                time.sleep(_POLL_S)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextmanager
def try_exclusive_lock(path: Path) -> Iterator[bool]:
    """Take the lock if it is free right now; yields whether it was taken."""
    with _try_lock(path, fcntl.LOCK_EX) as taken:
        yield taken


@contextmanager
def try_shared_lock(path: Path) -> Iterator[bool]:
    """Take a shared lock if no one holds the exclusive one: readers probing whether a
    writer is busy do not get in each other's way."""
    with _try_lock(path, fcntl.LOCK_SH) as taken:
        yield taken


@contextmanager
def _try_lock(path: Path, mode: int) -> Iterator[bool]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            taken = True
        except BlockingIOError:
            taken = False
        try:
            yield taken
        finally:
            if taken:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
