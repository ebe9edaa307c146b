"""Durable record of the fleet: a snapshot of desired state and a journal of operation steps.

Both live in a state directory on the head node. Every write is atomic (temp file, fsync,
rename, fsync of the directory) so a crash leaves either the old or the new content, never a
torn file; the journal is append-only JSON lines, fsynced per step, written *before* the
step is acted on, so a restarted manager knows how far an operation got.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

SNAPSHOT_FILE = "fleet.json"
JOURNAL_FILE = "journal.jsonl"


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("w") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)
    _fsync_dir(path.parent)


class Journal:
    def __init__(self, state_dir: Path) -> None:
        self._dir = state_dir
        self._dir.mkdir(parents=True, exist_ok=True)

    @property
    def journal_path(self) -> Path:
        return self._dir / JOURNAL_FILE

    def load_snapshot(self) -> dict[str, Any]:
        path = self._dir / SNAPSHOT_FILE
        if not path.exists():
            return {"models": {}, "aliases": {}}
        loaded: dict[str, Any] = json.loads(path.read_text())
        return loaded

    def save_snapshot(self, snapshot: dict[str, Any]) -> None:
        write_atomic(self._dir / SNAPSHOT_FILE, json.dumps(snapshot, indent=2, sort_keys=True))

    def append(self, entry: dict[str, Any]) -> None:
        data = (json.dumps(entry, sort_keys=True) + "\n").encode()
        with self.journal_path.open("a+b") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size:
                handle.seek(size - 1)
                if handle.read(1) != b"\n":
                    # A torn last line (crash mid-write) has no newline: start a fresh line,
                    # or this entry would be glued to it and lost with it.
                    data = b"\n" + data
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())

    def entries(self) -> list[dict[str, Any]]:
        if not self.journal_path.exists():
            return []
        entries = []
        for line in self.journal_path.read_text().splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                # A torn last line from a crash mid-write: the step it described never ran.
                continue
        return entries

    def unfinished(self) -> dict[str, Any] | None:
        """The last operation that has a start but no end, with its last recorded phase."""
        open_ops: dict[str, dict[str, Any]] = {}
        for entry in self.entries():
            op_id = entry.get("op_id")
            if op_id is None:
                continue
            if entry.get("event") == "start":
                open_ops[op_id] = dict(entry)
            elif entry.get("event") == "phase" and op_id in open_ops:
                open_ops[op_id]["phase"] = entry.get("phase")
            elif entry.get("event") == "end":
                open_ops.pop(op_id, None)
        return list(open_ops.values())[-1] if open_ops else None
