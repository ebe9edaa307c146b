"""Fetch a manifest's files with `huggingface_hub.snapshot_download` into one model directory.

Resume: files complete on disk (with huggingface_hub's metadata for this commit) are skipped,
and a connection dropped mid-file is continued with an HTTP Range request inside the same
run. huggingface_hub 1.x/2.x download each file to a process-unique temporary name, so a
file in flight when the process is killed starts over on the next run; everything finished
before the kill is kept.
"""

from __future__ import annotations

import errno
import re
from importlib import import_module
from pathlib import Path
from typing import Any

from cluster.staging.errors import IntegrityError, StagingError
from cluster.staging.hub_errors import hub_errors, one_line
from cluster.staging.manifest import SourceManifest

_FNMATCH_SPECIALS = re.compile(r"([*?\[])")
# What huggingface_hub says when a file's received size differs from the announced one.
_SIZE_MISMATCH_MARKER = "Consistency check failed"


def literal_pattern(path: str) -> str:
    """An fnmatch pattern matching exactly `path` (huggingface_hub filters files with fnmatch)."""
    return _FNMATCH_SPECIALS.sub(r"[\1]", path)


def download_snapshot(
    manifest: SourceManifest,
    entry_dir: Path,
    *,
    endpoint: str,
    token: str | None,
    hub_cache_dir: Path,
    workers: int,
) -> None:
    """Download every manifest file at the manifest's commit into `entry_dir`."""
    from huggingface_hub import snapshot_download

    source = manifest.source
    if source.repo_id is None or manifest.commit is None:
        raise ValueError(f"{source} is not a hub source with a resolved commit")
    try:
        with hub_errors(source, endpoint):
            snapshot_download(
                source.repo_id,
                revision=manifest.commit,
                local_dir=entry_dir,
                cache_dir=hub_cache_dir,
                endpoint=endpoint,
                token=token,
                allow_patterns=[literal_pattern(item.path) for item in manifest.files],
                max_workers=workers,
                tqdm_class=_silent_tqdm_class(),
            )
    except StagingError:
        raise
    except OSError as exc:
        first_line = one_line(exc)
        if _SIZE_MISMATCH_MARKER in str(exc):
            raise IntegrityError(
                f"{source}: a file arrived with another size than announced: {first_line}"
            ) from exc
        if exc.errno == errno.ENOSPC:
            raise StagingError(
                f"{source}: the cache volume of {entry_dir} filled up during the download "
                f"(something else wrote to it; raise reserve_gib): {first_line}"
            ) from exc
        raise StagingError(f"{source}: cannot write into {entry_dir}: {first_line}") from exc


def _silent_tqdm_class() -> Any:
    """A tqdm that never draws: our own monitor reports progress for the whole entry."""
    tqdm_auto = import_module("tqdm.auto")

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.pop("name", None)
        kwargs["disable"] = True
        tqdm_auto.tqdm.__init__(self, *args, **kwargs)

    return type("SilentTqdm", (tqdm_auto.tqdm,), {"__init__": __init__})
