"""What a model source contains, known before a byte of it is downloaded."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from domain.model_source import ModelSource, parse_model_source


@dataclass(frozen=True)
class ManifestFile:
    """One file to stage, relative to the model directory (always '/'-separated)."""

    path: str
    size_bytes: int
    sha256: str | None = None
    """Given by the Hub for LFS files (the big ones); None for small git files and local dirs."""


@dataclass(frozen=True)
class SourceManifest:
    """The files of one source at one resolved revision. Admission uses `total_bytes`."""

    source: ModelSource
    files: tuple[ManifestFile, ...]
    commit: str | None = None
    """The commit the Hub resolved the revision to; every download uses it, so a branch that
    moves during a staging cannot mix two versions. None for local and miniature sources."""
    skipped_files: tuple[str, ...] = ()
    """Repo files left out because vLLM does not need them (see `file_selection`)."""

    @property
    def total_bytes(self) -> int:
        return sum(item.size_bytes for item in self.files)

    @property
    def weight_bytes(self) -> int:
        return sum(item.size_bytes for item in self.files if item.path.endswith(".safetensors"))

    @property
    def file_count(self) -> int:
        return len(self.files)

    def digest(self) -> str:
        """A fingerprint of exactly what is staged; two nodes with equal digests hold the same."""
        canonical = json.dumps(self._identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def _identity(self) -> dict[str, Any]:
        # The repo and commit, not the text: `org/name`, `org/name@main` and `org/name@<sha>`
        # that resolve to one commit are the same files.
        return {
            "source": self.source.repo_id or str(self.source),
            "commit": self.commit,
            "files": [[item.path, item.size_bytes, item.sha256] for item in self.files],
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "source": str(self.source),
            "commit": self.commit,
            "total_bytes": self.total_bytes,
            "files": [
                {"path": item.path, "size_bytes": item.size_bytes, "sha256": item.sha256}
                for item in self.files
            ],
            "skipped_files": list(self.skipped_files),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SourceManifest:
        return cls(
            source=parse_model_source(str(data["source"])),
            commit=data.get("commit"),
            files=tuple(
                ManifestFile(
                    path=str(item["path"]),
                    size_bytes=int(item["size_bytes"]),
                    sha256=item.get("sha256"),
                )
                for item in data["files"]
            ),
            skipped_files=tuple(str(path) for path in data.get("skipped_files", [])),
        )
