"""Build a `SourceManifest`: ask the Hub for file names, sizes and hashes, or list a directory.

Nothing here downloads a model file: for a Hub repo this is one metadata request (two when the
Hub leaves sizes out), so admission can decide on the real size first.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from cluster.staging.errors import HubUnreachableError
from cluster.staging.file_selection import select_files
from cluster.staging.hub_environment import resolve_endpoint
from cluster.staging.hub_errors import hub_errors
from cluster.staging.manifest import ManifestFile, SourceManifest
from domain.exit_codes import UserInputError
from domain.model_source import ModelSource, SourceKind

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
    """Generate (or reuse) a miniature's directory (`cluster/miniature/`)."""
    from cluster.miniature import ensure_miniature

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
