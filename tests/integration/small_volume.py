"""A real, small filesystem (tmpfs) for disk-full and race tests; skips where mount is denied."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def can_mount() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


@contextmanager
def small_volume(path: Path, size_bytes: int) -> Iterator[Path]:
    """Mount a tmpfs of `size_bytes` at `path` for the `with` block."""
    path.mkdir(parents=True, exist_ok=True)
    if not can_mount():
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)
