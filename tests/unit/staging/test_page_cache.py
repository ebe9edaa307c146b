"""NEW's weights are read into the page cache before a hold only where memory allows."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.staging.page_cache import available_memory_bytes, prefetch_weights, weight_files

pytestmark = pytest.mark.unit


def _model(tmp_path: Path) -> Path:
    (tmp_path / "model-00001.safetensors").write_bytes(b"w" * 3000)
    (tmp_path / "model-00002.safetensors").write_bytes(b"w" * 1000)
    (tmp_path / "config.json").write_text("{}")
    return tmp_path


def test_every_weight_file_is_read_when_memory_covers_them(tmp_path: Path) -> None:
    report = prefetch_weights(_model(tmp_path), available=10_000, reserve=1000)
    assert (report.read_bytes, report.skipped) == (4000, None)
    assert [p.name for p in weight_files(tmp_path)] == [
        "model-00001.safetensors",
        "model-00002.safetensors",
    ]
    assert "read 0.00 GiB of weights into the page cache" in report.describe()


def test_nothing_is_read_when_the_weights_would_crowd_out_the_reserve(tmp_path: Path) -> None:
    report = prefetch_weights(_model(tmp_path), available=4500, reserve=1000)
    assert report.read_bytes == 0
    assert report.skipped is not None and "available" in report.skipped
    assert report.describe().startswith("weights not prefetched:")


def test_unknown_memory_reads_nothing(tmp_path: Path) -> None:
    assert prefetch_weights(_model(tmp_path), available=None, reserve=0).read_bytes == 0


def test_mem_available_is_read_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   18000000 kB\n")
    assert available_memory_bytes(meminfo) == 18_000_000 * 1024
    assert available_memory_bytes(tmp_path / "missing") is None
