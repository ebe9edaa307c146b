"""Journal: atomic snapshots and the append-only operation journal (no Ray)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cluster.atomic_file import atomic_write_text as write_atomic
from cluster.fleet.journal import (
    JOURNAL_FILE,
    JOURNAL_FORMAT_VERSION,
    SNAPSHOT_FILE,
    Journal,
    StateFormatError,
    check_state_format,
)
from domain.deployment_config import ModelDeploymentConfig
from domain.fleet_state import FLEET_FORMAT_VERSION, FleetState


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path / "state")


def _start(op_id: str, kind: str = "swap") -> dict[str, Any]:
    return {"op_id": op_id, "event": "start", "kind": kind, "details": {"old": "a"}}


def _phase(op_id: str, phase: str) -> dict[str, Any]:
    return {"op_id": op_id, "event": "phase", "phase": phase}


def _end(op_id: str) -> dict[str, Any]:
    return {"op_id": op_id, "event": "end", "outcome": "done"}


def _fleet(*names: str) -> FleetState:
    state = FleetState()
    for name in names:
        config = ModelDeploymentConfig(name=name, source="miniature:llama", aliases=("x",))
        state = state.with_model(config, 1)
    return state


class TestSnapshot:
    def test_missing_snapshot_is_an_empty_fleet(self, journal: Journal) -> None:
        assert journal.load_snapshot() == FleetState()

    def test_round_trip(self, journal: Journal) -> None:
        snapshot = _fleet("qwen")
        journal.save_snapshot(snapshot)
        assert journal.load_snapshot() == snapshot

    def test_save_replaces_previous_snapshot(self, journal: Journal) -> None:
        journal.save_snapshot(_fleet("a"))
        journal.save_snapshot(_fleet("b"))
        assert journal.load_snapshot() == _fleet("b")

    def test_snapshot_is_written_in_the_state_dir_with_its_format(self, tmp_path: Path) -> None:
        state = tmp_path / "deep" / "state"
        Journal(state).save_snapshot(FleetState())
        written = json.loads((state / SNAPSHOT_FILE).read_text())
        assert written["format_version"] == FLEET_FORMAT_VERSION == 2
        assert written["models"] == {} and written["aliases"] == {}


class TestFormat:
    """State on disk carries a format version; another format is refused in one line."""

    def test_a_new_journal_starts_with_its_format_line(self, journal: Journal) -> None:
        journal.append(_start("op1"))
        first = json.loads(journal.journal_path.read_text().splitlines()[0])
        assert first == {"event": "format", "format_version": JOURNAL_FORMAT_VERSION}
        assert journal.entries() == [_start("op1")]

    def test_a_format1_fleet_snapshot_is_refused_saying_what_to_do(self, tmp_path: Path) -> None:
        (tmp_path / SNAPSHOT_FILE).write_text(json.dumps({"models": {}, "aliases": {}}))
        with pytest.raises(StateFormatError) as error:
            Journal(tmp_path)
        message = str(error.value)
        assert "\n" not in message
        assert "format 1" in message and "switchyard down" in message
        with pytest.raises(StateFormatError):
            check_state_format(tmp_path)

    def test_a_format1_journal_of_finished_operations_is_moved_aside(self, tmp_path: Path) -> None:
        old = [_start("op1"), _end("op1")]
        (tmp_path / JOURNAL_FILE).write_text("".join(json.dumps(e) + "\n" for e in old))
        journal = Journal(tmp_path)
        assert journal.entries() == []
        assert (tmp_path / "journal.format1.jsonl").read_text().count("\n") == 2
        journal.append(_start("op2"))
        assert journal.unfinished() is not None

    def test_a_format1_journal_with_an_unfinished_operation_is_refused(
        self, tmp_path: Path
    ) -> None:
        (tmp_path / JOURNAL_FILE).write_text(json.dumps(_start("op1")) + "\n")
        with pytest.raises(StateFormatError, match="interrupted under journal format 1"):
            Journal(tmp_path)
        assert (tmp_path / JOURNAL_FILE).exists(), "nothing is moved or lost"

    def test_a_newer_journal_format_is_refused(self, tmp_path: Path) -> None:
        (tmp_path / JOURNAL_FILE).write_text('{"event": "format", "format_version": 9}\n')
        with pytest.raises(StateFormatError, match="journal format 9"):
            Journal(tmp_path)

    def test_a_corrupt_snapshot_is_refused(self, tmp_path: Path) -> None:
        (tmp_path / SNAPSHOT_FILE).write_text("{not json")
        with pytest.raises(StateFormatError, match="cannot be read"):
            Journal(tmp_path)


class TestWriteAtomic:
    def test_writes_content_and_creates_parents(self, tmp_path: Path) -> None:
        target = tmp_path / "a" / "b" / "file.json"
        write_atomic(target, "hello")
        assert target.read_text() == "hello"

    def test_overwrites_existing_file(self, tmp_path: Path) -> None:
        target = tmp_path / "file.json"
        target.write_text("old content that is longer")
        write_atomic(target, "new")
        assert target.read_text() == "new"

    def test_leaves_no_temp_files(self, tmp_path: Path) -> None:
        target = tmp_path / "file.json"
        write_atomic(target, "one")
        write_atomic(target, "two")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["file.json"]

    def test_save_snapshot_leaves_no_temp_files(self, tmp_path: Path) -> None:
        journal = Journal(tmp_path)
        journal.save_snapshot(FleetState())
        journal.save_snapshot(_fleet("m"))
        assert sorted(p.name for p in tmp_path.iterdir()) == [SNAPSHOT_FILE]


class TestEntries:
    def test_no_journal_file_means_no_entries(self, journal: Journal) -> None:
        assert journal.entries() == []
        assert not journal.journal_path.exists()

    def test_journal_path_is_in_the_state_dir(self, tmp_path: Path) -> None:
        assert Journal(tmp_path).journal_path == tmp_path / JOURNAL_FILE

    def test_append_then_read_back_in_order(self, journal: Journal) -> None:
        entries = [_start("op1"), _phase("op1", "draining"), _end("op1")]
        for entry in entries:
            journal.append(entry)
        assert journal.entries() == entries

    def test_one_json_object_per_line(self, journal: Journal) -> None:
        journal.append(_start("op1"))
        journal.append(_end("op1"))
        lines = journal.journal_path.read_text().splitlines()
        assert [json.loads(line)["event"] for line in lines] == ["format", "start", "end"]

    def test_blank_lines_are_skipped(self, journal: Journal) -> None:
        journal.journal_path.write_text(
            "\n" + json.dumps(_start("op1")) + "\n\n   \n" + json.dumps(_end("op1")) + "\n\n"
        )
        assert journal.entries() == [_start("op1"), _end("op1")]

    def test_torn_last_line_is_ignored(self, journal: Journal) -> None:
        journal.append(_start("op1"))
        with journal.journal_path.open("a") as handle:
            handle.write('{"op_id": "op1", "event": "ph')
        assert journal.entries() == [_start("op1")]

    def test_append_after_torn_last_line_is_not_lost(self, journal: Journal) -> None:
        # A crash mid-write leaves a torn line without a newline; the restarted manager then
        # journals the operation's end, which must survive as its own line.
        journal.append(_start("op1"))
        with journal.journal_path.open("a") as handle:
            handle.write('{"op_id": "op1", "event": "ph')
        journal.append(_end("op1"))
        assert journal.entries() == [_start("op1"), _end("op1")]
        assert journal.unfinished() is None


class TestUnfinished:
    def test_no_operations(self, journal: Journal) -> None:
        assert journal.unfinished() is None

    def test_finished_operation_is_not_unfinished(self, journal: Journal) -> None:
        journal.append(_start("op1"))
        journal.append(_phase("op1", "preflight"))
        journal.append(_end("op1"))
        assert journal.unfinished() is None

    def test_open_operation_without_phase(self, journal: Journal) -> None:
        journal.append(_start("op1", kind="add"))
        open_op = journal.unfinished()
        assert open_op is not None
        assert open_op["op_id"] == "op1"
        assert open_op["kind"] == "add"
        assert "phase" not in open_op

    def test_open_operation_reports_its_last_phase(self, journal: Journal) -> None:
        journal.append(_start("op1"))
        journal.append(_phase("op1", "preflight"))
        journal.append(_phase("op1", "draining"))
        journal.append(_phase("op1", "removing_old"))
        open_op = journal.unfinished()
        assert open_op is not None
        assert open_op["op_id"] == "op1"
        assert open_op["phase"] == "removing_old"
        # The start entry's fields come along, so recovery knows what was being done.
        assert open_op["kind"] == "swap"
        assert open_op["details"] == {"old": "a"}

    def test_only_the_last_of_two_operations_is_open(self, journal: Journal) -> None:
        journal.append(_start("op1"))
        journal.append(_phase("op1", "switching"))
        journal.append(_end("op1"))
        journal.append(_start("op2", kind="remove"))
        journal.append(_phase("op2", "draining"))
        open_op = journal.unfinished()
        assert open_op is not None
        assert open_op["op_id"] == "op2"
        assert open_op["kind"] == "remove"
        assert open_op["phase"] == "draining"

    def test_torn_last_line_is_ignored(self, journal: Journal) -> None:
        journal.append(_start("op1"))
        journal.append(_phase("op1", "draining"))
        # The end entry was being written when the process died: it never took effect.
        with journal.journal_path.open("a") as handle:
            handle.write('{"event": "end", "op_id": "op1", "outc')
        open_op = journal.unfinished()
        assert open_op is not None
        assert open_op["op_id"] == "op1"
        assert open_op["phase"] == "draining"

    def test_torn_phase_keeps_the_previous_phase(self, journal: Journal) -> None:
        journal.append(_start("op1"))
        journal.append(_phase("op1", "preflight"))
        with journal.journal_path.open("a") as handle:
            handle.write('{"event": "phase", "op_id": "op1", "phase": "drai')
        open_op = journal.unfinished()
        assert open_op is not None
        assert open_op["phase"] == "preflight"

    def test_entries_without_op_id_are_ignored(self, journal: Journal) -> None:
        journal.append({"event": "start", "kind": "add"})
        journal.append({"note": "manager started"})
        assert journal.unfinished() is None

    def test_survives_a_new_journal_object(self, tmp_path: Path) -> None:
        Journal(tmp_path).append(_start("op1"))
        Journal(tmp_path).append(_phase("op1", "deploying_new"))
        open_op = Journal(tmp_path).unfinished()
        assert open_op is not None
        assert open_op["phase"] == "deploying_new"
