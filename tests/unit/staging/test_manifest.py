"""Manifests: what a source holds, sized before any download."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.staging.manifest import ManifestFile, SourceManifest, fetch_manifest, local_manifest
from domain.exit_codes import UserInputError
from domain.model_source import ModelSource

from .cache_builder import hub_manifest


def test_total_bytes_is_the_sum_of_the_staged_files_and_weight_bytes_the_safetensors():
    manifest = hub_manifest("org/m", {"config.json": 10, "model.safetensors": 1000})
    assert manifest.total_bytes == 1010
    assert manifest.weight_bytes == 1000
    assert manifest.file_count == 2


def test_the_digest_names_repo_commit_and_files_not_how_the_revision_was_written():
    files = (ManifestFile("model.safetensors", 5, "ab" * 32),)
    plain = SourceManifest(ModelSource.hub("org/m"), files, commit="c" * 40)
    pinned = SourceManifest(ModelSource.hub("org/m", "main"), files, commit="c" * 40)
    other_commit = SourceManifest(ModelSource.hub("org/m"), files, commit="d" * 40)
    assert plain.digest() == pinned.digest()
    assert plain.digest() != other_commit.digest()


def test_a_manifest_round_trips_through_json():
    manifest = SourceManifest(
        ModelSource.hub("org/m", "v1"),
        (ManifestFile("a.safetensors", 3, "00" * 32), ManifestFile("config.json", 2)),
        commit="e" * 40,
        skipped_files=("pytorch_model.bin",),
    )
    assert SourceManifest.from_json(manifest.to_json()) == manifest


def test_a_local_directory_lists_its_files_without_hidden_ones(tmp_path: Path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"x" * 100)
    (tmp_path / "pytorch_model.bin").write_bytes(b"x" * 100)
    (tmp_path / ".switchyard").mkdir()
    (tmp_path / ".switchyard" / "staged.json").write_text("{}")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "vocab.txt").write_text("abc")
    manifest = local_manifest(ModelSource.local(tmp_path), tmp_path)
    assert [item.path for item in manifest.files] == [
        "config.json",
        "model.safetensors",
        "sub/vocab.txt",
    ]
    assert manifest.total_bytes == 2 + 100 + 3
    assert manifest.skipped_files == ("pytorch_model.bin",)


def test_a_missing_local_directory_is_a_user_input_error(tmp_path: Path):
    with pytest.raises(UserInputError, match="is not a directory"):
        fetch_manifest(ModelSource.local(tmp_path / "nowhere"))


def test_an_empty_local_directory_is_a_user_input_error(tmp_path: Path):
    with pytest.raises(UserInputError, match="holds no files"):
        fetch_manifest(ModelSource.local(tmp_path))
