"""Does a model directory hold exactly what its manifest lists? Sizes always, sha256 on request."""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from cluster.staging.manifest import ManifestFile, SourceManifest

_HASH_CHUNK_BYTES = 8 * 1024 * 1024
# huggingface_hub keeps per-file download metadata and in-flight temporary files here.
HUB_METADATA_DIR = Path(".cache") / "huggingface"


@dataclass(frozen=True)
class FileProblem:
    """One file that does not match the manifest."""

    path: str
    expected: str
    found: str

    def describe(self) -> str:
        return f"{self.path}: expected {self.expected}, found {self.found}"


def file_on_disk(entry_dir: Path, item: ManifestFile) -> Path:
    return entry_dir.joinpath(*item.path.split("/"))


def complete_bytes(entry_dir: Path, manifest: SourceManifest) -> int:
    """Bytes of manifest files already on disk at their full size (what a resume keeps)."""
    return sum(
        item.size_bytes for item in manifest.files if _size_of(entry_dir, item) == item.size_bytes
    )


def missing_bytes(entry_dir: Path, manifest: SourceManifest) -> int:
    return manifest.total_bytes - complete_bytes(entry_dir, manifest)


def bytes_on_disk(entry_dir: Path) -> int:
    """Everything written under the entry, in-flight temporary files included (for progress)."""
    total = 0
    for root, _dirs, files in os.walk(entry_dir):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                continue  # a temporary file renamed or removed while we walked
    return total


def check_sizes(entry_dir: Path, manifest: SourceManifest) -> list[FileProblem]:
    problems = []
    for item in manifest.files:
        size = _size_of(entry_dir, item)
        if size != item.size_bytes:
            found = "no file" if size is None else f"{size} bytes"
            problems.append(FileProblem(item.path, f"{item.size_bytes} bytes", found))
    return problems


def check_sha256(entry_dir: Path, manifest: SourceManifest, workers: int) -> list[FileProblem]:
    """Hash every file the manifest has a sha256 for, `workers` files at a time."""
    hashed = [item for item in manifest.files if item.sha256]

    def one(item: ManifestFile) -> FileProblem | None:
        digest = sha256_of(file_on_disk(entry_dir, item))
        if digest == item.sha256:
            return None
        return FileProblem(item.path, f"sha256 {item.sha256}", f"sha256 {digest}")

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return [problem for problem in pool.map(one, hashed) if problem is not None]


def verify_entry(
    entry_dir: Path, manifest: SourceManifest, *, sha256: bool, workers: int
) -> list[FileProblem]:
    """Sizes first (cheap); hashes only when every size is right."""
    problems = check_sizes(entry_dir, manifest)
    if problems or not sha256:
        return problems
    return check_sha256(entry_dir, manifest, workers)


def flush_to_disk(entry_dir: Path, manifest: SourceManifest) -> None:
    """fsync every file, so the staged marker written next never outlives its data after a
    power loss (huggingface_hub does not fsync what it downloads)."""
    for item in manifest.files:
        fd = os.open(file_on_disk(entry_dir, item), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def discard_files(entry_dir: Path, paths: list[str]) -> None:
    """Remove bad files and huggingface_hub's record of them, so the next staging fetches them
    again instead of trusting a file whose commit matches."""
    for relative in paths:
        parts = relative.split("/")
        entry_dir.joinpath(*parts).unlink(missing_ok=True)
        metadata = entry_dir / HUB_METADATA_DIR / "download"
        metadata.joinpath(*parts[:-1], f"{parts[-1]}.metadata").unlink(missing_ok=True)


def discard_orphan_downloads(entry_dir: Path) -> int:
    """Delete temporary files a killed download left behind; returns the bytes freed.

    huggingface_hub names each in-flight file uniquely per process and never reuses one, so
    after a kill they are only wasted space. Call this only while holding the entry's lock.
    """
    freed = 0
    download_dir = entry_dir / HUB_METADATA_DIR / "download"
    if not download_dir.is_dir():
        return 0
    for path in download_dir.rglob("*.incomplete"):
        try:
            freed += path.stat().st_size
            path.unlink()
        except OSError:
            continue
    return freed


def _size_of(entry_dir: Path, item: ManifestFile) -> int | None:
    try:
        return file_on_disk(entry_dir, item).stat().st_size
    except OSError:
        return None
