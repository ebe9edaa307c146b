"""Which nodes share a cache directory: a marker file written once, read by every node.

Two nodes that mount one filesystem (NFS, Lustre) see the same marker, so staging there
once serves both; two local disks hold different markers. A filesystem id (st_dev) would
not do: NFS clients number the same export differently, and two hosts' local disks can
carry the same number.
"""

from __future__ import annotations

import os
import uuid

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
    finally:
        temporary.unlink(missing_ok=True)
    found = _read(marker)
    if not found:
        raise OSError(f"cannot read the cache marker {marker}")
    return found


def _read(marker: os.PathLike[str]) -> str:
    try:
        with open(marker, encoding="utf-8") as handle:
            return handle.read().strip()
    except FileNotFoundError:
        return ""
