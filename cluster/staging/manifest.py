"""What a model source contains, known before a byte of it is downloaded: the files vLLM
needs, with sizes and hashes, from one Hub metadata request or a directory listing.

Many repos ship the same weights twice (safetensors plus PyTorch `.bin`, GGUF, or an
`original/` consolidated copy). vLLM loads safetensors when they exist, so staging the
other copies would double the bytes a swap waits for and the disk it needs: only the files a
vLLM deployment needs are listed.

Nothing here downloads a model file: for a Hub repo this is one metadata request (two when the
Hub leaves sizes out), so admission can decide on the real size first.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from cluster.staging.hub_download import resolve_endpoint
from cluster.staging.staging_errors import HubUnreachableError, hub_errors
from domain.exit_codes import UserInputError
from domain.model_source import ModelSource, SourceKind, parse_model_source


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


# --- Which of a repo's files a vLLM deployment needs

_SAFETENSORS_SUFFIX = ".safetensors"
# Weight formats vLLM does not read when safetensors are present.
_ALTERNATIVE_WEIGHT_SUFFIXES = frozenset(
    {".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack", ".onnx", ".ot", ".tflite", ".ckpt"}
)
# Folders that hold a second copy of the weights in another layout.
_DUPLICATE_WEIGHT_FOLDERS = frozenset({"original"})
# Repository plumbing that is never part of a model.
_REPO_PLUMBING = frozenset({".gitattributes"})


def has_safetensors(paths: Iterable[str]) -> bool:
    return any(path.endswith(_SAFETENSORS_SUFFIX) for path in paths)


def is_alternative_weight_file(path: str) -> bool:
    """True for weights in another format or folder than the safetensors vLLM loads."""
    pure = PurePosixPath(path)
    return pure.suffix in _ALTERNATIVE_WEIGHT_SUFFIXES or (
        len(pure.parts) > 1 and pure.parts[0] in _DUPLICATE_WEIGHT_FOLDERS
    )


def select_files(paths: Iterable[str]) -> list[str]:
    """The files to stage, in the given order: drop plumbing, and duplicate weights when
    safetensors exist (a repo with only `.bin` weights keeps them)."""
    all_paths = [path for path in paths if PurePosixPath(path).name not in _REPO_PLUMBING]
    if not has_safetensors(all_paths):
        return all_paths
    return [path for path in all_paths if not is_alternative_weight_file(path)]


# --- Building a manifest

# Switchyard's own files inside a model directory, never part of a model.
_HIDDEN_PREFIX = "."


def fetch_manifest(
    source: ModelSource,
    *,
    endpoint: str | None = None,
    token: str | None = None,
    miniature_dir: Path | None = None,
) -> SourceManifest:
    """List what `source` holds. Hub: names, sizes and LFS sha256 at the resolved commit.

    Raises `UserInputError` for a repo, revision or directory that does not exist, and
    `HubUnreachableError` when the Hub cannot be asked.
    """
    if source.kind is SourceKind.HUB:
        return _hub_manifest(source, resolve_endpoint(endpoint), token)
    if source.kind is SourceKind.LOCAL:
        assert source.path is not None
        return local_manifest(source, source.path)
    return local_manifest(source, generate_miniature(source, miniature_dir))


def local_manifest(source: ModelSource, directory: Path) -> SourceManifest:
    """The files of a directory on this node (hidden files and folders left out)."""
    if not directory.is_dir():
        raise UserInputError(f"model source: {directory} is not a directory on this node")
    sizes: dict[str, int] = {}
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith(_HIDDEN_PREFIX))
        for name in sorted(files):
            if name.startswith(_HIDDEN_PREFIX):
                continue
            full = Path(root, name)
            sizes[full.relative_to(directory).as_posix()] = full.stat().st_size
    if not sizes:
        raise UserInputError(f"model source: directory {directory} holds no files")
    chosen = select_files(sizes)
    return SourceManifest(
        source=source,
        files=tuple(ManifestFile(path=path, size_bytes=sizes[path]) for path in chosen),
        skipped_files=tuple(path for path in sizes if path not in set(chosen)),
    )


def generate_miniature(source: ModelSource, miniature_dir: Path | None) -> Path:
    """Generate (or reuse) a miniature's directory (`cluster/miniature_generator/`)."""
    from cluster.miniature_generator import ensure_miniature

    assert source.name is not None
    target = miniature_dir or Path(tempfile.gettempdir()) / "switchyard-miniatures"
    return Path(os.fspath(ensure_miniature(source.name, target)))


def _hub_manifest(source: ModelSource, endpoint: str, token: str | None) -> SourceManifest:
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    assert source.repo_id is not None
    api = HfApi(endpoint=endpoint, token=token)
    with hub_errors(source, endpoint):
        info = api.model_info(source.repo_id, revision=source.revision, files_metadata=True)
        commit = info.sha
        entries = _entries_from_siblings(info.siblings)
        if entries is None:
            # The Hub omits sizes for some listings; the tree endpoint always has them.
            tree = api.list_repo_tree(source.repo_id, revision=commit, recursive=True)
            entries = {
                item.path: ManifestFile(item.path, int(item.size), _lfs_sha256(item.lfs))
                for item in tree
                if isinstance(item, RepoFile)
            }
    if not commit:
        raise HubUnreachableError(f"{endpoint} did not say which commit {source} resolves to")
    if not entries:
        raise UserInputError(f"model source: hub repo {source} at {endpoint} holds no files")
    chosen = select_files(entries)
    return SourceManifest(
        source=source,
        commit=str(commit),
        files=tuple(entries[path] for path in chosen),
        skipped_files=tuple(path for path in entries if path not in set(chosen)),
    )


def _entries_from_siblings(siblings: Any) -> dict[str, ManifestFile] | None:
    if siblings is None or any(item.size is None for item in siblings):
        return None
    return {
        item.rfilename: ManifestFile(item.rfilename, int(item.size), _lfs_sha256(item.lfs))
        for item in siblings
    }


def _lfs_sha256(lfs: Any) -> str | None:
    if lfs is None:
        return None
    value = lfs.get("sha256") if isinstance(lfs, dict) else getattr(lfs, "sha256", None)
    return str(value) if value else None
