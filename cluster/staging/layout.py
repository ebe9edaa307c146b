"""Where everything lives inside a weight cache directory.

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

The locks are exclusive flock locks taken through `filelock` (on NFSv4 clients the kernel maps
flock to POSIX locks). The kernel drops a lock when its holder dies, so a killed staging never
leaves a lock behind.
"""

from __future__ import annotations

import re
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
