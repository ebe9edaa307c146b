"""Staging a local directory: nothing is copied, the node must see the manifest's files."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.staging.manifest import fetch_manifest
from cluster.staging.stage import check_disk, stage
from cluster.staging.staging_config import StagingConfig
from cluster.staging.staging_errors import IntegrityError
from domain.model_source import ModelSource


def model_dir(root: Path) -> Path:
    root.mkdir()
    (root / "config.json").write_text("{}")
    (root / "model.safetensors").write_bytes(b"w" * 64)
    return root


def test_a_local_directory_is_its_own_staged_path(tmp_path: Path):
    source = ModelSource.local(model_dir(tmp_path / "model"))
    staged = stage(source, StagingConfig(cache_dir=tmp_path / "cache"), node="n1")
    assert staged.path == source.path
    assert staged.reused and staged.downloaded_bytes == 0 and staged.entry is None
    assert staged.manifest.total_bytes == 66
    assert staged.to_json()["node"] == "n1"


def test_a_node_whose_copy_differs_from_the_manifest_refuses(tmp_path: Path):
    source = ModelSource.local(model_dir(tmp_path / "model"))
    manifest = fetch_manifest(source)
    (tmp_path / "model" / "model.safetensors").write_bytes(b"w" * 10)
    with pytest.raises(IntegrityError, match="node n2"):
        stage(source, StagingConfig(cache_dir=tmp_path / "cache"), manifest=manifest, node="n2")


def test_a_local_source_needs_no_cache_space(tmp_path: Path):
    source = ModelSource.local(model_dir(tmp_path / "model"))
    verdict = check_disk(fetch_manifest(source), StagingConfig(cache_dir=tmp_path / "cache"))
    assert verdict.need_bytes == 0 and verdict.fits
