"""Entries kept on disk whatever eviction wants: staged for a pending swap, or pinned by ops.

The manager passes the names it protects (serving models, the NEW model of a swap) directly;
this small file is how the CLI, and anything outside the manager, learns about pins.
"""

from __future__ import annotations

import json

from filelock import FileLock

from cluster.atomic_file import atomic_write_text
from cluster.staging.layout import CacheLayout, check_entry_name

_LOCK_TIMEOUT_S = 120.0


def read_pins(layout: CacheLayout) -> frozenset[str]:
    try:
        data = json.loads(layout.pins_file.read_text())
    except (OSError, ValueError):
        return frozenset()
    if not isinstance(data, dict):
        return frozenset()
    return frozenset(str(name) for name in data)


def pin(layout: CacheLayout, name: str, reason: str) -> None:
    check_entry_name(name)
    with FileLock(layout.ledger_lock, timeout=_LOCK_TIMEOUT_S):
        pins = _read_map(layout)
        pins[name] = reason
        atomic_write_text(layout.pins_file, json.dumps(pins, sort_keys=True))


def unpin(layout: CacheLayout, name: str) -> bool:
    """Remove a pin; returns whether there was one."""
    with FileLock(layout.ledger_lock, timeout=_LOCK_TIMEOUT_S):
        pins = _read_map(layout)
        existed = pins.pop(name, None) is not None
        atomic_write_text(layout.pins_file, json.dumps(pins, sort_keys=True))
    return existed


def release_pins(layout: CacheLayout, prefix: str, keep: frozenset[str]) -> list[str]:
    """Remove the pins whose reason is `prefix` + an owner not in `keep` (the manager's pins
    of apps that no longer exist); the entry names unpinned. Pins set by hand never carry
    the manager's prefix, so they stay."""
    if not layout.pins_file.exists():
        return []
    with FileLock(layout.ledger_lock, timeout=_LOCK_TIMEOUT_S):
        pins = _read_map(layout)
        released = [
            name
            for name, reason in pins.items()
            if reason.startswith(prefix) and reason.removeprefix(prefix) not in keep
        ]
        if released:
            for name in released:
                del pins[name]
            atomic_write_text(layout.pins_file, json.dumps(pins, sort_keys=True))
    return sorted(released)


def _read_map(layout: CacheLayout) -> dict[str, str]:
    try:
        data = json.loads(layout.pins_file.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
