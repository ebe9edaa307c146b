"""Fetch a manifest's files with `huggingface_hub.snapshot_download` into one model directory,
with the process settings huggingface_hub and hf_xet read set up before the first download.

Resume: files complete on disk (with huggingface_hub's metadata for this commit) are skipped,
and a connection dropped mid-file is continued with an HTTP Range request inside the same
run. huggingface_hub 1.x/2.x download each file to a process-unique temporary name, so a
file in flight when the process is killed starts over on the next run; everything finished
before the kill is kept.
"""

from __future__ import annotations

import errno
import logging
import os
import re
from collections.abc import MutableMapping
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cluster.staging.staging_errors import IntegrityError, StagingError, hub_errors, one_line

if TYPE_CHECKING:
    from cluster.staging.manifest import SourceManifest

# --- The process settings huggingface_hub and hf_xet read

DEFAULT_HUB_ENDPOINT = "https://huggingface.co"
_TRUE_VALUES = frozenset({"1", "on", "yes", "true"})

logger = logging.getLogger(__name__)


def resolve_endpoint(
    configured: str | None, environ: MutableMapping[str, str] | None = None
) -> str:
    """The Hub URL to use: the config's, else `HF_ENDPOINT`, else the public Hub.

    Read at call time and passed to every huggingface_hub call explicitly, because
    huggingface_hub reads `HF_ENDPOINT` once at import, which may predate the caller's setting.
    """
    env = os.environ if environ is None else environ
    endpoint = configured or env.get("HF_ENDPOINT") or DEFAULT_HUB_ENDPOINT
    return endpoint.rstrip("/")


def prepare_hub_environment(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Turn on Xet's high-performance mode and say what is ignored; returns the warnings logged.

    `HF_XET_HIGH_PERFORMANCE` is read by hf_xet (Rust) when it starts a transfer, so setting it
    here takes effect even if huggingface_hub is already imported. A user's explicit value wins.
    """
    env = os.environ if environ is None else environ
    env.setdefault("HF_XET_HIGH_PERFORMANCE", "1")
    warnings: list[str] = []
    if env.get("HF_HUB_ENABLE_HF_TRANSFER", "").strip().lower() in _TRUE_VALUES:
        warnings.append(
            "HF_HUB_ENABLE_HF_TRANSFER is set, but huggingface_hub 1.x and later ignore it and "
            "never use hf_transfer; downloads use hf_xet (HF_XET_HIGH_PERFORMANCE="
            f"{env.get('HF_XET_HIGH_PERFORMANCE')}) or plain HTTP instead"
        )
    for message in warnings:
        logger.warning(message)
    return warnings


# --- The download

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
