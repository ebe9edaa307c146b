"""Where everything lives inside a weight cache directory, and which nodes share one.

<cache_dir>/
  models/<entry>/                    the model directory handed to vLLM as `model=`
  models/<entry>/.switchyard/        manifest.json, staged.json (written last), last_used
  models/<entry>/.cache/huggingface/ huggingface_hub's per-file download metadata
  .switchyard/ledger.lock            flock guarding reservations.json and pins.json
  .switchyard/reservations.json      space promised to stagings still in progress
  .switchyard/pins.json              entries kept for a pending swap (never evicted)
  .switchyard/locks/<entry>.lock     held by the one process staging or evicting <entry>
                                     (and for a moment by each listing)
  .switchyard/hub-cache/             huggingface_hub's cache_dir (refs only)
  cache-id                           the marker that tells which nodes share this directory

The locks are exclusive flock locks taken through `filelock` (on NFSv4 clients the kernel maps
flock to POSIX locks). The kernel drops a lock when its holder dies, so a killed staging never
leaves a lock behind.

Two nodes that mount one filesystem (NFS, Lustre) see the same cache-id marker, so staging
there once serves both; two local disks hold different markers. A filesystem id (st_dev)
would not do: NFS clients number the same export differently, and two hosts' local disks can
carry the same number.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from cluster.staging.manifest import SourceManifest
from domain.model_source import SourceKind

_ENTRY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_COMMIT_CHARS_IN_NAME = 12


@dataclass(frozen=True)
class CacheLayout:
    """Paths of one cache directory. Creating the object touches nothing; `ensure()` does."""

    root: Path

    @property
    def models_dir(self) -> Path:
        return self.root / "models"

    @property
    def control_dir(self) -> Path:
        return self.root / ".switchyard"

    @property
    def ledger_lock(self) -> Path:
        return self.control_dir / "ledger.lock"

    @property
    def reservations_file(self) -> Path:
        return self.control_dir / "reservations.json"

    @property
    def pins_file(self) -> Path:
        return self.control_dir / "pins.json"

    @property
    def hub_cache_dir(self) -> Path:
        return self.control_dir / "hub-cache"

    @property
    def miniatures_dir(self) -> Path:
        return self.root / "miniatures"

    def entry_dir(self, name: str) -> Path:
        return self.models_dir / check_entry_name(name)

    def entry_lock(self, name: str) -> Path:
        return self.control_dir / "locks" / f"{check_entry_name(name)}.lock"

    def entry_names(self) -> list[str]:
        if not self.models_dir.is_dir():
            return []
        return sorted(
            path.name
            for path in self.models_dir.iterdir()
            if path.is_dir() and _ENTRY_NAME.fullmatch(path.name)
        )

    def ensure(self) -> None:
        for folder in (self.models_dir, self.control_dir / "locks", self.hub_cache_dir):
            folder.mkdir(parents=True, exist_ok=True)


def entry_name_for(manifest: SourceManifest) -> str:
    """`org--name--<commit12>` for a Hub source: one directory per repo and commit."""
    source = manifest.source
    if source.kind is not SourceKind.HUB or manifest.commit is None:
        raise ValueError(f"only hub sources with a resolved commit are cached, not {source}")
    assert source.repo_id is not None
    org, name = source.repo_id.split("/")
    return f"{org}--{name}--{manifest.commit[:_COMMIT_CHARS_IN_NAME]}"


def check_entry_name(name: str) -> str:
    """Refuse names that could escape the models directory ('..', '/')."""
    if not _ENTRY_NAME.fullmatch(name) or ".." in name:
        raise ValueError(f"not a cache entry name: {name!r}")
    return name


# --- Which nodes share a cache directory

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
