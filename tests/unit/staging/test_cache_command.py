"""`switchyard cache`: list, evict, prune and pin through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster.staging.cache_layout import CacheLayout
from domain.exit_codes import ExitCode
from switchyard import cli

from .cache_builder import entry_exists, make_entry


@pytest.fixture
def layout(tmp_path: Path) -> CacheLayout:
    return CacheLayout(tmp_path)


def test_list_json_shows_each_entry_with_node_state_and_sizes(layout, capsys):
    staged = make_entry(layout, "org/a", {"w.safetensors": 100}, last_used_epoch_s=1_000)
    partial = make_entry(
        layout, "org/b", {"w.safetensors": 100}, staged=False, written={"w.safetensors": 5}
    )
    assert cli.main(["cache", "list", "--json", "--cache-dir", str(layout.root)]) == ExitCode.OK
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows[staged]["state"] == "staged" and rows[staged]["expected_bytes"] == 100
    assert rows[partial]["state"] == "partial"
    assert all(row["node"] for row in rows.values())


def test_list_as_a_table_and_an_empty_cache(layout, capsys):
    assert cli.main(["cache", "list", "--cache-dir", str(layout.root)]) == ExitCode.OK
    assert "the cache is empty" in capsys.readouterr().out
    make_entry(layout, "org/a", {"w.safetensors": 100})
    cli.main(["cache", "list", "--cache-dir", str(layout.root)])
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["NODE", "NAME", "STATE"]
    assert "org/a" in out


def test_evict_by_name_or_by_hub_source(layout, capsys):
    first = make_entry(layout, "org/a", {"w.safetensors": 100})
    second = make_entry(layout, "org/b", {"w.safetensors": 100})
    assert cli.main(["cache", "evict", first, "--cache-dir", str(layout.root)]) == ExitCode.OK
    assert cli.main(["cache", "evict", "org/b", "--cache-dir", str(layout.root)]) == ExitCode.OK
    assert not entry_exists(layout, first) and not entry_exists(layout, second)
    assert "freed" in capsys.readouterr().out


def test_evict_refuses_a_pinned_model_and_deletes_nothing(layout, capsys):
    name = make_entry(layout, "org/a", {"w.safetensors": 100})
    assert cli.main(["cache", "pin", name, "--cache-dir", str(layout.root)]) == ExitCode.OK
    assert cli.main(["cache", "evict", name, "--cache-dir", str(layout.root)]) == ExitCode.REJECTED
    assert "pinned" in capsys.readouterr().err
    assert entry_exists(layout, name)
    assert cli.main(["cache", "unpin", name, "--cache-dir", str(layout.root)]) == ExitCode.OK
    assert cli.main(["cache", "evict", name, "--cache-dir", str(layout.root)]) == ExitCode.OK


def test_evict_of_an_unknown_name_is_bad_input(layout, capsys):
    assert (
        cli.main(["cache", "evict", "nothing", "--cache-dir", str(layout.root)])
        == ExitCode.BAD_INPUT
    )
    assert "no entry named 'nothing'" in capsys.readouterr().err


def test_prune_removes_partial_entries_and_keeps_staged_and_pinned_ones(layout, capsys):
    staged = make_entry(layout, "org/a", {"w.safetensors": 100})
    partial = make_entry(layout, "org/b", {"w.safetensors": 100}, staged=False)
    pinned_partial = make_entry(layout, "org/c", {"w.safetensors": 100}, staged=False)
    cli.main(["cache", "pin", pinned_partial, "--cache-dir", str(layout.root)])
    assert cli.main(["cache", "prune", "--cache-dir", str(layout.root)]) == ExitCode.OK
    assert entry_exists(layout, staged)
    assert not entry_exists(layout, partial)
    assert entry_exists(layout, pinned_partial)
    assert f"removed partial entry {partial}" in capsys.readouterr().out


def test_stage_dry_run_reports_real_size_and_verdict_for_a_local_directory(tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"w" * 2048)
    argv = ["stage", str(model), "--dry-run", "--json", "--cache-dir", str(tmp_path / "cache")]
    assert cli.main(argv) == ExitCode.OK
    report = json.loads(capsys.readouterr().out)
    assert report["manifest"]["total_bytes"] == 2048
    assert report["fits"] is True


def test_stage_of_bad_source_text_is_bad_input(tmp_path, capsys):
    assert cli.main(["stage", "not a source", "--cache-dir", str(tmp_path)]) == ExitCode.BAD_INPUT
    assert "model source" in capsys.readouterr().err
