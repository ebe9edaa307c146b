"""atomic_write_text: old content or new, never torn; the file and its folder are fsynced."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from cluster.atomic_file import atomic_write_text


def test_a_new_file_is_written_with_its_missing_folders(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "state.json"
    atomic_write_text(target, "hello ✓")
    assert target.read_text(encoding="utf-8") == "hello ✓"


def test_an_existing_file_is_replaced_whole_and_no_temporary_file_remains(
    tmp_path: Path,
) -> None:
    target = tmp_path / "state.json"
    atomic_write_text(target, "old content, longer than the new")
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_a_failed_write_keeps_the_old_content_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "state.json"
    atomic_write_text(target, "old")

    def refuse(src: str, dst: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk gone"):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_the_file_and_then_its_folder_are_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    atomic_write_text(tmp_path / "state.json", "x")
    assert synced == ["file", "dir"]


def test_permissions_are_those_a_plain_write_would_leave(tmp_path: Path) -> None:
    plain, atomic = tmp_path / "plain.json", tmp_path / "atomic.json"
    plain.write_text("x")
    atomic_write_text(atomic, "x")
    assert stat.S_IMODE(atomic.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)
    atomic.chmod(0o600)
    atomic_write_text(atomic, "y")
    assert stat.S_IMODE(atomic.stat().st_mode) == 0o600
