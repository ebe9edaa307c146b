"""Staging across a Ray cluster: one task pinned to each node that needs the weights.

The functions a task runs are plain; the Ray decoration is applied in `build_node_task` only.
Tasks ask for no CPU (`num_cpus=0`): staging waits on disk and network, and it must run
beside a model that holds every CPU of a node while it still serves.

Order of work, so that a refusal comes before the first byte on any node:
1. the driver fetches the manifest once (or takes the one admission used);
2. each node judges its own disk, in parallel; any node that cannot fit refuses them all;
3. `per_node`: each node downloads in parallel; `shared`: the first node downloads and every
   node then checks it sees the same verified directory;
4. the results are compared (same manifest digest, same path) before anyone may use them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cluster.staging.cache_entries import CacheEntry, is_staged, list_entries, release_pins
from cluster.staging.cache_layout import CacheLayout, cache_identity, entry_name_for
from cluster.staging.hub_download import resolve_endpoint
from cluster.staging.manifest import SourceManifest, fetch_manifest
from cluster.staging.space_gate import DiskVerdict
from cluster.staging.stage import StagedModel, check_disk, stage, stage_pinned
from cluster.staging.staging_config import StagingConfig, StagingMode
from cluster.staging.staging_errors import StagingError, one_line
from domain.model_source import ModelSource, SourceKind

if TYPE_CHECKING:
    from cluster.ray_adapters.node_agents import NodeAgents

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeStaging:
    """One node's outcome."""

    node_id: str
    node: str
    staged: StagedModel | None
    error: str | None
    shared_with: str | None = None
    """The node whose staging this one reuses (they see one cache), if so."""

    @property
    def ok(self) -> bool:
        return self.staged is not None and self.error is None


@dataclass(frozen=True)
class ClusterStaging:
    """Every needed node holds a verified directory of the same files; `path` is the first
    node's (the same on every node unless their cache roots differ)."""

    manifest: SourceManifest
    path: Path
    nodes: tuple[NodeStaging, ...]

    def path_on(self, node_id: str) -> Path | None:
        for item in self.nodes:
            if item.node_id == node_id and item.staged is not None:
                return item.staged.path
        return None


class ClusterStagingError(StagingError):
    """At least one node could not stage (or disagreed); the others' files stay cached but
    nothing counts as staged for the swap."""

    def __init__(self, message: str, nodes: tuple[NodeStaging, ...] = ()) -> None:
        super().__init__(message)
        self.nodes = nodes


# ---- what runs inside a task (plain functions) ----


def current_node_id() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())


def _require_node(node_id: str, node: str) -> None:
    """A result only counts for the node it claims; refuse if Ray ran us elsewhere."""
    actual = current_node_id()
    if actual != node_id:
        raise StagingError(f"task for node {node} ran on node {actual} instead")


def stage_task(
    source: ModelSource,
    config: StagingConfig,
    manifest: SourceManifest,
    protected: frozenset[str],
    node: str,
    node_id: str,
    pin_reason: str | None = None,
) -> StagedModel:
    _require_node(node_id, node)
    if pin_reason is None:
        return stage(source, config, manifest=manifest, protected=protected, node=node)
    # Pinned on this node's cache in the same task, until the manager releases it.
    return stage_pinned(
        source, config, pin_reason, manifest=manifest, protected=protected, node=node
    )


def cache_id_task(config: StagingConfig, node: str, node_id: str) -> str:
    _require_node(node_id, node)
    return cache_identity(CacheLayout(config.cache_dir))


def release_task(
    config: StagingConfig, prefix: str, keep: frozenset[str], node: str, node_id: str
) -> list[str]:
    _require_node(node_id, node)
    return release_pins(CacheLayout(config.cache_dir), prefix, keep)


def verify_task(
    manifest: SourceManifest, config: StagingConfig, node: str, node_id: str
) -> StagedModel:
    """Shared mode: prove this node sees the verified directory another node staged."""
    _require_node(node_id, node)
    if manifest.source.kind is not SourceKind.HUB:
        return stage(manifest.source, config, manifest=manifest, node=node)
    layout = CacheLayout(config.cache_dir)
    name = entry_name_for(manifest)
    entry_dir = layout.entry_dir(name)
    if not is_staged(entry_dir):
        raise StagingError(f"node {node}: {entry_dir} is not a staged copy of {manifest.source}")
    return StagedModel(entry_dir, manifest.source, manifest, node, name, 0, True)


def disk_task(
    manifest: SourceManifest,
    config: StagingConfig,
    protected: frozenset[str],
    node: str,
    node_id: str,
) -> DiskVerdict:
    _require_node(node_id, node)
    return check_disk(manifest, config, protected=protected, node=node)


def list_task(config: StagingConfig, node: str, node_id: str) -> list[CacheEntry]:
    _require_node(node_id, node)
    return list_entries(CacheLayout(config.cache_dir))


# ---- Ray wiring ----


def build_node_task(function: Callable[..., Any]) -> Any:
    """Decorate `function` as a Ray task that needs no CPU and is never retried (a retry
    would hide a failure the caller must see; staging itself resumes on the next call)."""
    import ray

    return ray.remote(num_cpus=0, max_retries=0)(function)


def pinned_to(node_id: str) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)


def node_label(node_ip: str, node_id: str) -> str:
    """'10.0.0.5/ab12cd34': an address people recognise plus the id's start."""
    return f"{node_ip or '?'}/{node_id[:8]}"


def node_labels(node_ids: Sequence[str]) -> dict[str, str]:
    """`node_label` of each node, from Ray's node table."""
    import ray

    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    addresses = {item["NodeID"]: item.get("NodeManagerAddress", "") for item in nodes}
    return {node_id: node_label(addresses.get(node_id, ""), node_id) for node_id in node_ids}


def run_on_nodes(
    function: Callable[..., Any],
    node_ids: Sequence[str],
    args_for: Callable[[str], tuple[Any, ...]],
    agents: NodeAgents | None = None,
) -> list[tuple[str, Any, str | None]]:
    """Run `function` once on each node in parallel; (node_id, result or None, error or None).
    On `agents` (the manager's long-lived per-node processes) when given, else as tasks."""
    import ray

    if agents is None:
        task = build_node_task(function)
        refs = [
            (
                node_id,
                task.options(scheduling_strategy=pinned_to(node_id)).remote(*args_for(node_id)),
            )
            for node_id in node_ids
        ]
    else:
        refs = [
            (node_id, agents.submit(node_id, function, *args_for(node_id))) for node_id in node_ids
        ]
    outcomes: list[tuple[str, Any, str | None]] = []
    for node_id, ref in refs:
        try:
            outcomes.append((node_id, ray.get(ref), None))
        except Exception as exc:
            if agents is not None:
                agents.failed(node_id, exc)
            cause = getattr(exc, "cause", None) or exc
            outcomes.append((node_id, None, one_line(cause)))
    return outcomes


NodeConfigs = StagingConfig | Mapping[str, StagingConfig]
"""One staging config for every node, or each node's own (its cache root may differ)."""


def _config_of(configs: NodeConfigs, node_id: str) -> StagingConfig:
    return configs if isinstance(configs, StagingConfig) else configs[node_id]


def check_disk_across_nodes(
    manifest: SourceManifest,
    config: NodeConfigs,
    node_ids: Sequence[str],
    *,
    protected: frozenset[str] = frozenset(),
    agents: NodeAgents | None = None,
) -> dict[str, DiskVerdict]:
    """Each node's disk verdict, judged on the node; for `plan` and before any download."""
    labels = node_labels(node_ids)
    outcomes = run_on_nodes(
        disk_task,
        node_ids,
        lambda node_id: (
            manifest,
            _config_of(config, node_id),
            protected,
            labels[node_id],
            node_id,
        ),
        agents,
    )
    failed = [f"node {labels[node_id]}: {error}" for node_id, _, error in outcomes if error]
    if failed:
        raise ClusterStagingError("cannot judge disk space: " + "; ".join(failed))
    return {node_id: verdict for node_id, verdict, _ in outcomes}


def cache_groups(
    configs: Mapping[str, StagingConfig],
    node_ids: Sequence[str],
    labels: Mapping[str, str],
    agents: NodeAgents | None = None,
) -> list[list[str]]:
    """`node_ids` grouped by the cache they see, in their order: declared `shared` caches
    are one group; `per_node` ones are told apart by their marker file."""
    roots = {configs[node_id].cache_dir for node_id in node_ids}
    if len(roots) == 1 and all(configs[n].mode is StagingMode.SHARED for n in node_ids):
        return [list(node_ids)]  # declared shared, at one path on every node
    outcomes = run_on_nodes(
        cache_id_task,
        node_ids,
        lambda node_id: (configs[node_id], labels[node_id], node_id),
        agents,
    )
    failed = [f"node {labels[node_id]}: {error}" for node_id, _, error in outcomes if error]
    if failed:
        raise ClusterStagingError("cannot read the cache markers: " + "; ".join(failed))
    groups: dict[str, list[str]] = {}
    for node_id, identity, _ in outcomes:
        groups.setdefault(str(identity), []).append(node_id)
    return list(groups.values())


def stage_across_nodes(
    source: ModelSource,
    config: StagingConfig,
    node_ids: Sequence[str],
    *,
    manifest: SourceManifest | None = None,
    protected: frozenset[str] = frozenset(),
    token: str | None = None,
    node_configs: Mapping[str, StagingConfig] | None = None,
    pin_reason: str | None = None,
    agents: NodeAgents | None = None,
) -> ClusterStaging:
    """Stage `source` for a deployment whose shards run on `node_ids`; see the module doc.

    `node_configs`: a node's own settings (its cache root) where they differ from `config`.
    `pin_reason`: pin the staged entry on each cache under this reason."""
    if not node_ids:
        raise ValueError("stage_across_nodes needs at least one node id")
    configs = {node_id: (node_configs or {}).get(node_id, config) for node_id in node_ids}
    resolved = manifest or fetch_manifest(
        source, endpoint=resolve_endpoint(config.hub_endpoint), token=token
    )
    labels = node_labels(node_ids)
    groups = cache_groups(configs, node_ids, labels, agents)
    downloaders = [group[0] for group in groups]
    verdicts = check_disk_across_nodes(
        resolved, configs, downloaders, protected=protected, agents=agents
    )
    refused = [
        verdict
        for node_id, verdict in verdicts.items()
        if not verdict.fits and not (configs[node_id].allow_eviction and verdict.fits_with_eviction)
    ]
    if refused:
        raise ClusterStagingError("; ".join(verdict.describe() for verdict in refused))

    outcomes = run_on_nodes(
        stage_task,
        downloaders,
        lambda node_id: (
            source,
            configs[node_id],
            resolved,
            protected,
            labels[node_id],
            node_id,
            pin_reason,
        ),
        agents,
    )
    results = [
        NodeStaging(node_id, labels[node_id], staged, error) for node_id, staged, error in outcomes
    ]
    sharing = {node_id: labels[group[0]] for group in groups for node_id in group[1:]}
    if sharing and all(item.ok for item in results):
        checked = run_on_nodes(
            verify_task,
            list(sharing),
            lambda node_id: (resolved, configs[node_id], labels[node_id], node_id),
            agents,
        )
        results += [
            NodeStaging(node_id, labels[node_id], staged, error, shared_with=sharing[node_id])
            for node_id, staged, error in checked
        ]
    return _agreed(resolved, tuple(results))


def release_across_nodes(
    configs: NodeConfigs,
    node_ids: Sequence[str],
    prefix: str,
    keep: frozenset[str],
    agents: NodeAgents | None = None,
) -> dict[str, list[str]]:
    """Unpin, on every node's cache, the entries pinned under `prefix` + a name not in
    `keep`; the entries released per node label (nodes that fail are logged, not raised:
    a pin left behind only keeps files longer)."""
    labels = node_labels(node_ids)
    outcomes = run_on_nodes(
        release_task,
        node_ids,
        lambda node_id: (_config_of(configs, node_id), prefix, keep, labels[node_id], node_id),
        agents,
    )
    released: dict[str, list[str]] = {}
    for node_id, names, error in outcomes:
        if error:
            log.warning("node %s: cannot release pins: %s", labels[node_id], error)
        elif names:
            released[labels[node_id]] = list(names)
    return released


def list_entries_across_nodes(
    config: StagingConfig, node_ids: Sequence[str]
) -> dict[str, list[CacheEntry]]:
    """Each node's cache listing, keyed by node label."""
    labels = node_labels(node_ids)
    outcomes = run_on_nodes(list_task, node_ids, lambda node_id: (config, labels[node_id], node_id))
    failed = [f"node {labels[node_id]}: {error}" for node_id, _, error in outcomes if error]
    if failed:
        raise ClusterStagingError("cannot list caches: " + "; ".join(failed))
    return {labels[node_id]: entries for node_id, entries, _ in outcomes}


def _agreed(manifest: SourceManifest, results: tuple[NodeStaging, ...]) -> ClusterStaging:
    """Every node must have succeeded with the expected manifest at one common path."""
    problems = [f"node {item.node}: {item.error}" for item in results if not item.ok]
    expected = manifest.digest()
    staged = [item.staged for item in results if item.staged is not None]
    for item in staged:
        if item.manifest.digest() != expected:
            problems.append(f"node {item.node}: staged another file list than the manifest")
    if problems or not staged:
        raise ClusterStagingError(
            f"staging {manifest.source} failed: " + "; ".join(problems or ["no node staged it"]),
            results,
        )
    return ClusterStaging(manifest=manifest, path=staged[0].path, nodes=results)


def list_entries_on_every_node(cache_dir: Path) -> dict[str, list[CacheEntry]]:
    """Each alive node's cache listing, from a driver that joins the cluster this machine
    belongs to (`address="auto"`) for the listing only."""
    import ray

    ray.init(address="auto", logging_level=logging.ERROR, log_to_driver=False)
    try:
        nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
        node_ids = [item["NodeID"] for item in nodes if item.get("Alive")]
        return list_entries_across_nodes(StagingConfig(cache_dir=cache_dir), node_ids)
    finally:
        ray.shutdown()
