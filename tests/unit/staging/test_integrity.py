"""Integrity: a model is staged only when every file has its size (and hash, when known)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from cluster.staging.integrity import (
    HUB_METADATA_DIR,
    bytes_on_disk,
    complete_bytes,
    discard_files,
    discard_orphan_downloads,
    missing_bytes,
    verify_entry,
)
from cluster.staging.manifest import ManifestFile, SourceManifest
from domain.model_source import ModelSource


def manifest_for(files: dict[str, bytes], *, with_hashes: bool = True) -> SourceManifest:
    return SourceManifest(
        ModelSource.hub("org/m"),
        tuple(
            ManifestFile(
                path, len(content), hashlib.sha256(content).hexdigest() if with_hashes else None
            )
            for path, content in files.items()
        ),
        commit="c" * 40,
    )


def write(root: Path, files: dict[str, bytes]) -> None:
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(content)


FILES = {"config.json": b"{}", "shards/model-1.safetensors": b"a" * 100}


def test_matching_files_verify_clean(tmp_path: Path):
    write(tmp_path, FILES)
    assert verify_entry(tmp_path, manifest_for(FILES), sha256=True, workers=2) == []


def test_a_missing_or_short_file_is_reported_by_size(tmp_path: Path):
    write(tmp_path, {"shards/model-1.safetensors": b"a" * 40})
    problems = verify_entry(tmp_path, manifest_for(FILES), sha256=True, workers=2)
    assert [problem.describe() for problem in problems] == [
        "config.json: expected 2 bytes, found no file",
        "shards/model-1.safetensors: expected 100 bytes, found 40 bytes",
    ]


def test_same_size_other_content_is_caught_by_sha256_only_when_asked(tmp_path: Path):
    write(tmp_path, {**FILES, "shards/model-1.safetensors": b"b" * 100})
    assert verify_entry(tmp_path, manifest_for(FILES), sha256=False, workers=1) == []
    problems = verify_entry(tmp_path, manifest_for(FILES), sha256=True, workers=1)
    assert [problem.path for problem in problems] == ["shards/model-1.safetensors"]


def test_resume_keeps_complete_files_and_counts_the_rest_as_missing(tmp_path: Path):
    write(tmp_path, {"config.json": b"{}", "shards/model-1.safetensors": b"a" * 30})
    manifest = manifest_for(FILES)
    assert complete_bytes(tmp_path, manifest) == 2
    assert missing_bytes(tmp_path, manifest) == 100


def test_discarded_files_lose_their_download_record_too(tmp_path: Path):
    write(tmp_path, FILES)
    record = tmp_path / HUB_METADATA_DIR / "download" / "shards" / "model-1.safetensors.metadata"
    record.parent.mkdir(parents=True)
    record.write_text("commit\netag\n")
    discard_files(tmp_path, ["shards/model-1.safetensors"])
    assert not (tmp_path / "shards/model-1.safetensors").exists()
    assert not record.exists()
    assert (tmp_path / "config.json").exists()


def test_temporary_files_of_killed_downloads_are_removed(tmp_path: Path):
    download = tmp_path / HUB_METADATA_DIR / "download"
    download.mkdir(parents=True)
    (download / "model.safetensors.abc.1234abcd.incomplete").write_bytes(b"x" * 50)
    (download / "model.safetensors.metadata").write_text("keep")
    assert discard_orphan_downloads(tmp_path) == 50
    assert [path.name for path in download.iterdir()] == ["model.safetensors.metadata"]


def test_bytes_on_disk_counts_everything_under_the_entry(tmp_path: Path):
    write(tmp_path, FILES)
    assert bytes_on_disk(tmp_path) == 102
    assert bytes_on_disk(tmp_path / "absent") == 0
