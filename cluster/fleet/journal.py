"""Durable record of the fleet: a snapshot of desired state and a journal of operation steps.

Both live in a state directory on the head node. Every write is atomic (temp file, fsync,
rename, fsync of the directory) so a crash leaves either the old or the new content, never a
torn file; the journal is append-only JSON lines, fsynced per step, written *before* the
step is acted on, so a restarted manager knows how far an operation got.

Both carry a format version (`fleet.json`'s `format_version`, the journal's first line). A
state directory of another format is refused with one line saying what to do, except a
journal of format 1 with no unfinished operation: that is history only, and is moved aside
(`journal.format1.jsonl`) for a new one.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cluster.atomic_file import atomic_write_text, fsync_dir
from domain.exit_codes import UserInputError
from domain.fleet_state import FLEET_FORMAT_VERSION, FleetState

log = logging.getLogger(__name__)

SNAPSHOT_FILE = "fleet.json"
JOURNAL_FILE = "journal.jsonl"
JOURNAL_FORMAT_VERSION = 2
_HEADER = {"event": "format", "format_version": JOURNAL_FORMAT_VERSION}
_RETIRED_JOURNAL = "journal.format1.jsonl"


class StateFormatError(UserInputError):
    """The state directory was written in a format this Switchyard does not read."""


class Journal:
    def __init__(self, state_dir: Path) -> None:
        self._dir = state_dir
        self._dir.mkdir(parents=True, exist_ok=True)
        check_state_format(state_dir)
        self._retire_format1_journal()

    @property
    def journal_path(self) -> Path:
        return self._dir / JOURNAL_FILE

    def load_snapshot(self) -> FleetState:
        path = self._dir / SNAPSHOT_FILE
        if not path.exists():
            return FleetState()
        return _read_snapshot(path)

    def save_snapshot(self, snapshot: FleetState) -> None:
        text = json.dumps(snapshot.model_dump(mode="json"), indent=2, sort_keys=True)
        atomic_write_text(self._dir / SNAPSHOT_FILE, text)

    def append(self, entry: dict[str, Any]) -> None:
        data = (json.dumps(entry, sort_keys=True) + "\n").encode()
        with self.journal_path.open("a+b") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                data = (json.dumps(_HEADER, sort_keys=True) + "\n").encode() + data
            else:
                handle.seek(size - 1)
                if handle.read(1) != b"\n":
                    # A torn last line (crash mid-write) has no newline: start a fresh line,
                    # or this entry would be glued to it and lost with it.
                    data = b"\n" + data
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())

    def entries(self) -> list[dict[str, Any]]:
        """Every entry in order, without the format line; a torn last line is skipped."""
        return [e for e in _read_lines(self.journal_path) if e.get("event") != "format"]

    def unfinished(self) -> dict[str, Any] | None:
        """The last operation that has a start but no end, with its last recorded phase and
        the details decided since its start."""
        return _unfinished(self.entries())

    def _retire_format1_journal(self) -> None:
        if _journal_format(self.journal_path) != 1:
            return
        # check_state_format refused one with an unfinished operation: this is history.
        retired = self._dir / _RETIRED_JOURNAL
        self.journal_path.replace(retired)
        fsync_dir(self._dir)
        log.warning("moved the format-1 journal to %s; a new one starts", retired)


def check_state_format(state_dir: Path) -> None:
    """Raise StateFormatError, saying what to do, unless `state_dir` holds state this
    version reads (or none)."""
    snapshot = state_dir / SNAPSHOT_FILE
    if snapshot.exists():
        _read_snapshot(snapshot)
    journal = state_dir / JOURNAL_FILE
    version = _journal_format(journal)
    if version == 1 and _unfinished(_read_lines(journal)) is not None:
        raise StateFormatError(
            f"{journal} holds an operation interrupted under journal format 1, which this "
            "version cannot finish: finish it with the Switchyard that started it, or remove "
            f"{state_dir} and add the models again"
        )
    if version not in (None, 1, JOURNAL_FORMAT_VERSION):
        raise StateFormatError(
            f"{journal} has journal format {version}; this Switchyard reads format "
            f"{JOURNAL_FORMAT_VERSION}: use the version that wrote it"
        )


def _read_snapshot(path: Path) -> FleetState:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise StateFormatError(f"{path} cannot be read ({exc}); restore or remove it") from exc
    version = data.get("format_version") if isinstance(data, dict) else None
    if version != FLEET_FORMAT_VERSION:
        found = "format 1 (no format_version)" if version is None else f"format {version}"
        raise StateFormatError(
            f"{path} is {found}; this Switchyard reads format {FLEET_FORMAT_VERSION}: run "
            "`switchyard down` with the version that wrote it (that clears the fleet), or "
            f"remove {path}, then `switchyard up` and add the models again"
        )
    try:
        return FleetState.model_validate(data)
    except ValidationError as exc:
        raise StateFormatError(f"{path} is not a valid fleet state: {exc}") from exc


def _journal_format(path: Path) -> int | None:
    """The journal's format (1: written before format lines existed); None when empty."""
    for entry in _read_lines(path):
        if entry.get("event") == "format":
            version = entry.get("format_version")
            return version if isinstance(version, int) else -1
        return 1
    return None


def _read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            # A torn last line from a crash mid-write: the step it described never ran.
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def _unfinished(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    open_ops: dict[str, dict[str, Any]] = {}
    for entry in entries:
        op_id = entry.get("op_id")
        if op_id is None:
            continue
        if entry.get("event") == "start":
            open_ops[op_id] = dict(entry)
        elif entry.get("event") == "phase" and op_id in open_ops:
            open_ops[op_id]["phase"] = entry.get("phase")
        elif entry.get("event") == "details" and op_id in open_ops:
            decided = entry.get("details")
            if isinstance(decided, dict):
                open_ops[op_id]["details"] = {**open_ops[op_id].get("details", {}), **decided}
        elif entry.get("event") == "end":
            open_ops.pop(op_id, None)
    return list(open_ops.values())[-1] if open_ops else None
