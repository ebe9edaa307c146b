"""Which nodes share a cache directory, and which pins the manager may release.

A cache directory's identity (`cluster/staging/cache_layout.py`) is a marker file written once
and read by every node: nodes mounting one filesystem agree on it, two disks differ, and an
existing marker is never replaced. `release_pins` (`cluster/staging/cache_entries.py`) removes
only the manager's own pins (reason `PIN_PREFIX` + source, `cluster/staging/replica_weights.py`)
of sources no longer kept; pins set by hand stay.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cluster.staging.cache_entries import pin, read_pins, release_pins
from cluster.staging.cache_layout import MARKER_NAME, CacheLayout, cache_identity
from cluster.staging.replica_weights import PIN_PREFIX, pin_reason

OLD = "Qwen/Qwen2.5-0.5B-Instruct"
NEW = "miniature:llama-new"


def marker(layout: CacheLayout) -> Path:
    return layout.control_dir / MARKER_NAME


# ---------------------------------------------------------------------- cache identity


def test_the_first_call_writes_the_marker_with_a_fresh_id(tmp_path: Path) -> None:
    layout = CacheLayout(tmp_path / "cache")
    found = cache_identity(layout)
    assert len(found) == 32
    int(found, 16)  # hexadecimal
    assert marker(layout).read_text() == found + "\n"


def test_a_second_call_reads_the_same_id(tmp_path: Path) -> None:
    layout = CacheLayout(tmp_path)
    assert cache_identity(layout) == cache_identity(layout)


def test_two_nodes_seeing_one_directory_agree(tmp_path: Path) -> None:
    shared = tmp_path / "nfs" / "cache"
    mount = tmp_path / "mnt"
    mount.symlink_to(shared.parent, target_is_directory=True)
    first = cache_identity(CacheLayout(shared))
    assert cache_identity(CacheLayout(shared)) == first
    assert cache_identity(CacheLayout(mount / "cache")) == first


def test_two_directories_have_different_ids(tmp_path: Path) -> None:
    one = cache_identity(CacheLayout(tmp_path / "disk-1"))
    two = cache_identity(CacheLayout(tmp_path / "disk-2"))
    assert one != two


def test_an_existing_marker_is_read_not_replaced(tmp_path: Path) -> None:
    layout = CacheLayout(tmp_path)
    layout.control_dir.mkdir(parents=True)
    marker(layout).write_text("  written-by-another-node\n")
    assert cache_identity(layout) == "written-by-another-node"
    assert marker(layout).read_text() == "  written-by-another-node\n"


def test_no_temporary_file_is_left_behind(tmp_path: Path) -> None:
    layout = CacheLayout(tmp_path)
    cache_identity(layout)
    cache_identity(layout)
    assert sorted(p.name for p in layout.control_dir.iterdir()) == [MARKER_NAME]


def test_a_node_losing_the_race_takes_the_winners_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another node links its marker between this node's read and its own link."""
    layout = CacheLayout(tmp_path)
    real_link = os.link

    def link_after_the_winner(source: str | os.PathLike[str], target: Path) -> None:
        target.write_text("the-winner\n")
        real_link(source, target)

    monkeypatch.setattr(os, "link", link_after_the_winner)
    assert cache_identity(layout) == "the-winner"
    assert sorted(p.name for p in layout.control_dir.iterdir()) == [MARKER_NAME]


# ------------------------------------------------------------------------ pin reasons


def test_a_filesystem_without_hard_links_still_gets_one_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(*_: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    first = cache_identity(CacheLayout(tmp_path))
    assert first and cache_identity(CacheLayout(tmp_path)) == first
    assert [p.name for p in CacheLayout(tmp_path).control_dir.iterdir()] == [MARKER_NAME]


def test_an_empty_marker_is_an_error_that_says_what_to_do(tmp_path: Path) -> None:
    layout = CacheLayout(tmp_path)
    layout.control_dir.mkdir(parents=True)
    (layout.control_dir / MARKER_NAME).write_text("")
    with pytest.raises(OSError, match="is empty: delete it"):
        cache_identity(layout)


def test_the_managers_pin_reason_is_its_prefix_and_the_source() -> None:
    assert pin_reason(OLD) == "switchyard serves Qwen/Qwen2.5-0.5B-Instruct"
    assert pin_reason(OLD).removeprefix(PIN_PREFIX) == OLD


# ---------------------------------------------------------------------- releasing pins


def test_without_a_pins_file_nothing_is_released(tmp_path: Path) -> None:
    layout = CacheLayout(tmp_path)
    assert release_pins(layout, PIN_PREFIX, frozenset()) == []
    assert not layout.pins_file.exists()


def test_only_the_managers_pins_of_sources_no_longer_kept_are_released(tmp_path: Path) -> None:
    layout = CacheLayout(tmp_path)
    pin(layout, "old-entry", pin_reason(OLD))
    pin(layout, "new-entry", pin_reason(NEW))
    pin(layout, "by-hand", "kept for the demo")
    assert release_pins(layout, PIN_PREFIX, frozenset({NEW})) == ["old-entry"]
    assert read_pins(layout) == frozenset({"new-entry", "by-hand"})


def test_pins_set_by_hand_stay_whatever_is_kept(tmp_path: Path) -> None:
    layout = CacheLayout(tmp_path)
    pin(layout, "by-hand", "pending swap")
    pin(layout, "quoted", f"note: {PIN_PREFIX}{OLD}")  # the prefix, but not at the start
    assert release_pins(layout, PIN_PREFIX, frozenset()) == []
    assert read_pins(layout) == frozenset({"by-hand", "quoted"})


def test_released_names_come_back_sorted(tmp_path: Path) -> None:
    layout = CacheLayout(tmp_path)
    for name in ("zeta", "alpha", "mu"):
        pin(layout, name, pin_reason(f"org/{name}"))
    assert release_pins(layout, PIN_PREFIX, frozenset()) == ["alpha", "mu", "zeta"]
    assert read_pins(layout) == frozenset()


def test_a_source_is_kept_only_by_its_exact_name(tmp_path: Path) -> None:
    layout = CacheLayout(tmp_path)
    pin(layout, "old-entry", pin_reason(OLD))
    assert release_pins(layout, PIN_PREFIX, frozenset({OLD.lower(), "Qwen/Qwen2.5"})) == [
        "old-entry"
    ]


def test_the_pins_file_keeps_the_remaining_reasons(tmp_path: Path) -> None:
    layout = CacheLayout(tmp_path)
    pin(layout, "new-entry", pin_reason(NEW))
    pin(layout, "old-entry", pin_reason(OLD))
    release_pins(layout, PIN_PREFIX, frozenset({NEW}))
    assert json.loads(layout.pins_file.read_text()) == {"new-entry": pin_reason(NEW)}


def test_an_unreadable_pins_file_releases_nothing(tmp_path: Path) -> None:
    layout = CacheLayout(tmp_path)
    layout.control_dir.mkdir(parents=True)
    layout.pins_file.write_text("{not json")
    assert release_pins(layout, PIN_PREFIX, frozenset()) == []
    assert layout.pins_file.read_text() == "{not json"
