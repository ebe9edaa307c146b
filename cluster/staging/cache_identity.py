"""Which nodes share a cache directory: a marker file written once, read by every node.

Two nodes that mount one filesystem (NFS, Lustre) see the same marker, so staging there
once serves both; two local disks hold different markers. A filesystem id (st_dev) would
not do: NFS clients number the same export differently, and two hosts' local disks can
carry the same number.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from cluster.staging.layout import CacheLayout

MARKER_NAME = "cache-id"


def cache_identity(layout: CacheLayout) -> str:
    """This cache's id, creating the marker if there is none yet.

    Created by hard-linking a complete temporary file into place: the link either appears
    with its whole content or fails because another node won the race, whose id is then
    read. A reader never sees a half-written marker."""
    marker = layout.control_dir / MARKER_NAME
    existing = _read(marker)
    if existing:
        return existing
    layout.control_dir.mkdir(parents=True, exist_ok=True)
    candidate = uuid.uuid4().hex
    temporary = layout.control_dir / f".{MARKER_NAME}.{candidate}"
    temporary.write_text(candidate + "\n")
    try:
        os.link(temporary, marker)
    except FileExistsError:
        pass
    except OSError:
        # A filesystem without hard links (some FUSE and object-store mounts): create it
        # exclusively instead; a reader may then see it empty for a moment, hence the wait.
        _create_exclusively(marker, candidate)
    finally:
        temporary.unlink(missing_ok=True)
    for _ in range(_READ_TRIES):
        found = _read(marker)
        if found:
            return found
        time.sleep(_READ_PAUSE_S)
    raise OSError(
        f"the cache marker {marker} is empty: delete it (a node writes a new one on its next "
        "staging) unless another node is writing it now"
    )


_READ_TRIES = 20
_READ_PAUSE_S = 0.05


def _create_exclusively(marker: Path, content: str) -> None:
    try:
        descriptor = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(content + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _read(marker: os.PathLike[str]) -> str:
    try:
        with open(marker, encoding="utf-8") as handle:
            return handle.read().strip()
    except FileNotFoundError:
        return ""
