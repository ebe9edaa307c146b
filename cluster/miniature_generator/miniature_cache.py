"""A per-machine cache of miniatures, generated on first use and shared by processes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Final

from filelock import FileLock

from cluster.miniature_generator.catalog import check_seed, recipe_for
from cluster.miniature_generator.writer import CONFIG_FILE, partial_prefix, write_miniature

FORMAT_VERSION: Final = 2
"""Part of every cached folder's name: bump it whenever generation changes a single byte, so an
upgraded Switchyard never serves a miniature written by older code."""
# 2: the Kimi-K2.5 and MiniMax-M2.5 tokenizers gained their reasoning and tool-call tags.


def cached_miniature_dir(name: str, cache_dir: Path, *, seed: int = 0) -> Path:
    return Path(cache_dir).absolute() / f"{name}-seed{seed}-v{FORMAT_VERSION}"


def ensure_miniature(name: str, cache_dir: Path, *, seed: int = 0) -> Path:
    """The cached model directory for `name` and `seed`, written first if it is missing.

    Safe when several processes call it at once: one writes while the others wait on a lock
    file, then all return the same directory.
    """
    recipe_for(name)
    check_seed(seed)
    target = cached_miniature_dir(name, cache_dir, seed=seed)
    if (target / CONFIG_FILE).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(target.parent / f".{target.name}.lock"):
        if (target / CONFIG_FILE).is_file():
            return target
        _remove_leftovers(target)
        return write_miniature(name, target, seed=seed)


def _remove_leftovers(target: Path) -> None:
    """Staging folders of a writer that crashed; only the lock holder writes here."""
    for leftover in target.parent.glob(partial_prefix(target) + "*"):
        shutil.rmtree(leftover, ignore_errors=True)
    if target.is_dir() and not any(target.iterdir()):
        target.rmdir()
