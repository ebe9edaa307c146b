"""Stage one model on this node: make its weights a verified local directory vLLM can load.

A hot swap calls this for NEW while OLD still serves. Every failure raises a `StagingError`
(a `Rejected`) before anything that serves is touched: the disk check refuses before the
first byte, a partial download is never marked staged, and the caller's "protected" entries
(serving models, pending swaps) are never evicted.
"""

from __future__ import annotations

import logging
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from cluster.staging.cache_entries import (
    clear_staged_marker,
    is_staged,
    pin,
    read_entry_manifest,
    touch_last_used,
    write_entry_manifest,
    write_staged_marker,
)
from cluster.staging.cache_layout import CacheLayout, entry_name_for
from cluster.staging.hub_download import (
    download_snapshot,
    prepare_hub_environment,
    resolve_endpoint,
)
from cluster.staging.integrity import (
    bytes_on_disk,
    check_sizes,
    discard_files,
    discard_orphan_downloads,
    flush_to_disk,
    missing_bytes,
    verify_entry,
)
from cluster.staging.manifest import (
    SourceManifest,
    fetch_manifest,
    generate_miniature,
    local_manifest,
)
from cluster.staging.progress import (
    DiskProgressMonitor,
    ProgressSink,
    default_sink,
    format_bytes,
    format_duration,
)
from cluster.staging.space_gate import DiskVerdict, FreeBytesProbe, SpaceGate, disk_free_bytes
from cluster.staging.staging_config import StagingConfig
from cluster.staging.staging_errors import IntegrityError, StagingError
from domain.model_source import ModelSource, SourceKind

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StagedModel:
    """A verified model directory on one node."""

    path: Path
    """Give this to vLLM as `model=`."""
    source: ModelSource
    manifest: SourceManifest
    node: str
    entry: str | None
    """The cache entry name; None for local and miniature sources, which are not cached."""
    downloaded_bytes: int
    reused: bool
    """True when everything was already staged (or the source is a local directory)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "source": str(self.source),
            "commit": self.manifest.commit,
            "manifest_digest": self.manifest.digest(),
            "total_bytes": self.manifest.total_bytes,
            "node": self.node,
            "entry": self.entry,
            "downloaded_bytes": self.downloaded_bytes,
            "reused": self.reused,
        }


def default_node_name() -> str:
    return socket.gethostname()


def stage(
    source: ModelSource,
    config: StagingConfig,
    *,
    manifest: SourceManifest | None = None,
    protected: frozenset[str] = frozenset(),
    node: str | None = None,
    token: str | None = None,
    sink: ProgressSink | None = None,
    free_bytes: FreeBytesProbe = disk_free_bytes,
) -> StagedModel:
    """Make `source` a verified directory on this node and return it.

    `manifest`: pass the one admission used, so the staged files are exactly those it sized.
    `protected`: cache entry names eviction must not touch (serving, pinned for a swap).
    """
    node_name = node or default_node_name()
    if source.kind is SourceKind.LOCAL:
        return _stage_local(source, manifest, node_name)
    if source.kind is SourceKind.MINIATURE:
        layout = CacheLayout(config.cache_dir)
        path = generate_miniature(source, layout.miniatures_dir)
        return StagedModel(path, source, local_manifest(source, path), node_name, None, 0, True)
    return _stage_hub(
        source,
        config,
        manifest=manifest,
        protected=protected,
        node=node_name,
        token=token,
        sink=sink,
        free_bytes=free_bytes,
    )


def stage_pinned(
    source: ModelSource,
    config: StagingConfig,
    pin_reason: str,
    *,
    manifest: SourceManifest | None = None,
    protected: frozenset[str] = frozenset(),
    node: str | None = None,
) -> StagedModel:
    """`stage()`, then pin the entry under `pin_reason` on the same cache, so eviction and
    other stagings on the node leave it alone until the pin is released (local and
    miniature sources have no entry to pin)."""
    staged = stage(source, config, manifest=manifest, protected=protected, node=node)
    if staged.entry is not None:
        pin(CacheLayout(config.cache_dir), staged.entry, pin_reason)
    return staged


def check_disk(
    manifest: SourceManifest,
    config: StagingConfig,
    *,
    protected: frozenset[str] = frozenset(),
    node: str | None = None,
    free_bytes: FreeBytesProbe = disk_free_bytes,
) -> DiskVerdict:
    """The disk verdict `stage()` would reach on this node now; changes nothing."""
    node_name = node or default_node_name()
    layout = CacheLayout(config.cache_dir)
    gate = SpaceGate(layout, config, node_name, free_bytes=free_bytes)
    if manifest.source.kind is not SourceKind.HUB:
        return gate.verdict(
            entry=None, model=str(manifest.source), need_bytes=0, protected=protected
        )
    name = entry_name_for(manifest)
    entry_dir = layout.entry_dir(name)
    need = 0 if _already_staged(entry_dir, manifest) else missing_bytes(entry_dir, manifest)
    return gate.verdict(
        entry=name, model=str(manifest.source), need_bytes=need, protected=protected
    )


def _stage_local(source: ModelSource, manifest: SourceManifest | None, node: str) -> StagedModel:
    assert source.path is not None
    expected = manifest or local_manifest(source, source.path)
    problems = check_sizes(source.path, expected)
    if problems:
        raise IntegrityError(
            f"node {node}: {source.path} differs from its manifest: "
            + "; ".join(problem.describe() for problem in problems[:3])
        )
    return StagedModel(source.path, source, expected, node, None, 0, True)


def _stage_hub(
    source: ModelSource,
    config: StagingConfig,
    *,
    manifest: SourceManifest | None,
    protected: frozenset[str],
    node: str,
    token: str | None,
    sink: ProgressSink | None,
    free_bytes: FreeBytesProbe,
) -> StagedModel:
    endpoint = resolve_endpoint(config.hub_endpoint)
    prepare_hub_environment()
    resolved = manifest or fetch_manifest(source, endpoint=endpoint, token=token)
    layout = CacheLayout(config.cache_dir)
    layout.ensure()
    name = entry_name_for(resolved)
    entry_dir = layout.entry_dir(name)
    try:
        # Only waiting for the entry's lock is caught: the ledger lock or huggingface_hub's
        # own locks timing out during the download are different failures.
        held = FileLock(layout.entry_lock(name)).acquire(timeout=config.entry_lock_timeout_s)
    except Timeout as exc:
        raise StagingError(
            f"node {node}: another process kept staging {name} for more than "
            f"{format_duration(config.entry_lock_timeout_s)}"
        ) from exc
    with held:
        if _already_staged(entry_dir, resolved):
            touch_last_used(entry_dir)
            return StagedModel(entry_dir, source, resolved, node, name, 0, True)
        downloaded = _download_and_verify(
            resolved, config, layout, name, node, endpoint, token, sink, free_bytes, protected
        )
        return StagedModel(entry_dir, source, resolved, node, name, downloaded, False)


def _already_staged(entry_dir: Path, manifest: SourceManifest) -> bool:
    stored = read_entry_manifest(entry_dir)
    return stored is not None and stored.digest() == manifest.digest() and is_staged(entry_dir)


def _download_and_verify(
    manifest: SourceManifest,
    config: StagingConfig,
    layout: CacheLayout,
    name: str,
    node: str,
    endpoint: str,
    token: str | None,
    sink: ProgressSink | None,
    free_bytes: FreeBytesProbe,
    protected: frozenset[str],
) -> int:
    """Runs while holding the entry's lock. Returns the bytes that were missing."""
    entry_dir = layout.entry_dir(name)
    model = str(manifest.source)
    # From here until the marker is rewritten the entry is PARTIAL, whatever was there before.
    clear_staged_marker(entry_dir)
    entry_dir.mkdir(parents=True, exist_ok=True)
    write_entry_manifest(entry_dir, manifest)
    discard_orphan_downloads(entry_dir)
    need = missing_bytes(entry_dir, manifest)
    gate = SpaceGate(layout, config, node, free_bytes=free_bytes)
    started = time.monotonic()
    with gate.reserve(entry=name, model=model, need_bytes=need, protected=protected) as verdict:
        logger.info("%s", verdict.describe())
        if need > 0:
            complete_at_start = manifest.total_bytes - need
            on_disk_at_start = bytes_on_disk(entry_dir)
            with DiskProgressMonitor(
                node=node,
                model=model,
                total_bytes=manifest.total_bytes,
                done_bytes=lambda: (
                    complete_at_start + max(0, bytes_on_disk(entry_dir) - on_disk_at_start)
                ),
                sink=sink or default_sink(config.progress_interval_s),
                on_heartbeat=lambda: gate.book.refresh(name),
            ):
                download_snapshot(
                    manifest,
                    entry_dir,
                    endpoint=endpoint,
                    token=token,
                    hub_cache_dir=layout.hub_cache_dir,
                    workers=config.download_workers,
                )
    problems = verify_entry(
        entry_dir, manifest, sha256=config.verify_sha256, workers=config.download_workers
    )
    if problems:
        discard_files(entry_dir, [problem.path for problem in problems])
        raise IntegrityError(
            f"node {node}: {model} failed verification, {len(problems)} file(s) removed so the "
            "next staging fetches them again: "
            + "; ".join(problem.describe() for problem in problems[:3])
        )
    flush_to_disk(entry_dir, manifest)
    write_staged_marker(entry_dir, manifest, node)
    touch_last_used(entry_dir)
    logger.info(
        "staged %s on node %s at %s (%s downloaded in %s)",
        model,
        node,
        entry_dir,
        format_bytes(need),
        format_duration(time.monotonic() - started),
    )
    return need
