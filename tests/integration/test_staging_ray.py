"""Staging across a real local Ray cluster with two raylets: one pinned task per node.

Both raylets run on this machine and so share one disk; the entry lock makes the second
node's task wait for the first and reuse its files, which the results show.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.staging.cache_entries import EntryState, read_pins
from cluster.staging.cache_layout import CacheLayout
from cluster.staging.manifest import fetch_manifest
from cluster.staging.node_tasks import (
    ClusterStagingError,
    check_disk_across_nodes,
    list_entries_across_nodes,
    release_across_nodes,
    stage_across_nodes,
)
from cluster.staging.staging_config import StagingConfig, StagingMode
from domain.model_source import parse_model_source

from .local_hub import LocalHub
from .tiny_hub_model import REPO, SHARD_1, SHARD_2, tiny_model_files

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def node_ids() -> Iterator[list[str]]:
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    # Raylets inherit the environment, so their workers can import the project.
    old_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), old_path]))
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False},
    )
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=True)
        yield [node["NodeID"] for node in ray.nodes() if node["Alive"]]
    finally:
        ray.shutdown()
        cluster.shutdown()
        if old_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old_path


@pytest.fixture
def hub() -> Iterator[LocalHub]:
    with LocalHub() as local_hub:
        local_hub.add_repo(REPO, tiny_model_files())
        yield local_hub


def config_for(cache_dir: Path, hub: LocalHub, **overrides: object) -> StagingConfig:
    return StagingConfig.model_validate(
        {"cache_dir": cache_dir, "reserve_gib": 0, "hub_endpoint": hub.url, **overrides}
    )


def test_the_cluster_has_two_nodes(node_ids):
    assert len(node_ids) == 2


def test_per_node_caches_that_are_one_directory_are_told_apart_by_marker_and_staged_once(
    node_ids, hub: LocalHub, tmp_path: Path
):
    config = config_for(tmp_path, hub, mode=StagingMode.PER_NODE)
    result = stage_across_nodes(parse_model_source(REPO), config, node_ids)
    assert [item.node_id for item in result.nodes] == node_ids
    assert all(item.ok for item in result.nodes)
    assert all(item.node.endswith(item.node_id[:8]) for item in result.nodes)
    assert {item.staged.path for item in result.nodes if item.staged} == {result.path}
    # Both raylets see one directory: its marker says so, so one node downloads and the
    # other only checks it sees the verified copy.
    first, second = result.nodes
    assert first.staged is not None and not first.staged.reused and first.shared_with is None
    assert second.shared_with == first.node
    assert len(hub.downloads(REPO, SHARD_1)) == 1
    assert (result.path / SHARD_2).is_file()


def per_node_dirs(tmp_path: Path, hub: LocalHub, node_ids, **second: object):
    """Each node its own cache root (as an inventory `cache_dir` override gives it)."""
    base = config_for(tmp_path / "default", hub, mode=StagingMode.PER_NODE)
    first = base.model_copy(update={"cache_dir": tmp_path / "node-a"})
    other = base.model_copy(update={"cache_dir": tmp_path / "node-b", **second})
    return base, {node_ids[0]: first, node_ids[1]: other}


def test_nodes_with_their_own_cache_roots_each_stage_into_theirs(
    node_ids, hub: LocalHub, tmp_path: Path
):
    base, configs = per_node_dirs(tmp_path, hub, node_ids)
    result = stage_across_nodes(
        parse_model_source(REPO), base, node_ids, node_configs=configs, pin_reason="serves x"
    )
    paths = {item.node_id: item.staged.path for item in result.nodes if item.staged}
    assert paths[node_ids[0]].is_relative_to(tmp_path / "node-a")
    assert paths[node_ids[1]].is_relative_to(tmp_path / "node-b")
    assert all(item.shared_with is None for item in result.nodes)
    assert len(hub.downloads(REPO, SHARD_1)) == 2
    assert not (tmp_path / "default").exists()
    # Each node pinned its own copy; releasing what no model serves unpins both.
    for config in configs.values():
        assert read_pins(CacheLayout(config.cache_dir))
    released = release_across_nodes(configs, node_ids, "serves ", frozenset())
    assert len(released) == 2
    assert all(not read_pins(CacheLayout(c.cache_dir)) for c in configs.values())


def test_one_node_without_room_refuses_by_name_before_any_node_downloads(
    node_ids, hub: LocalHub, tmp_path: Path
):
    base, configs = per_node_dirs(tmp_path, hub, node_ids, reserve_gib=10**6)
    with pytest.raises(ClusterStagingError) as refused:
        stage_across_nodes(parse_model_source(REPO), base, node_ids, node_configs=configs)
    assert node_ids[1][:8] in str(refused.value)
    assert node_ids[0][:8] not in str(refused.value)
    assert hub.downloads(REPO, SHARD_1) == []


def test_shared_mode_downloads_once_then_every_node_checks_it_sees_the_model(
    node_ids, hub: LocalHub, tmp_path: Path
):
    config = config_for(tmp_path, hub, mode=StagingMode.SHARED)
    result = stage_across_nodes(parse_model_source(REPO), config, node_ids)
    assert [item.node_id for item in result.nodes] == node_ids
    assert all(item.ok for item in result.nodes)
    first, *others = result.nodes
    assert all(item.shared_with == first.node for item in others)
    assert len(hub.downloads(REPO, SHARD_1)) == 1


def test_a_node_without_room_refuses_the_whole_staging_before_any_byte(
    node_ids, hub: LocalHub, tmp_path: Path
):
    config = config_for(tmp_path, hub, mode=StagingMode.PER_NODE, reserve_gib=10**6)
    manifest = fetch_manifest(parse_model_source(REPO), endpoint=hub.url)
    verdicts = check_disk_across_nodes(manifest, config, node_ids)
    assert set(verdicts) == set(node_ids)
    assert not any(verdict.fits for verdict in verdicts.values())
    with pytest.raises(ClusterStagingError) as refused:
        stage_across_nodes(parse_model_source(REPO), config, node_ids, manifest=manifest)
    # One directory: its one downloader is judged (and named).
    assert node_ids[0][:8] in str(refused.value)
    assert hub.resolve_requests(REPO) == []


def test_a_failure_on_a_node_is_reported_with_the_node_and_nothing_counts_as_staged(
    node_ids, hub: LocalHub, tmp_path: Path
):
    files = tiny_model_files()
    hub.faults.served_content[f"{REPO}/{SHARD_2}"] = files[SHARD_2][:-1]
    config = config_for(tmp_path, hub, mode=StagingMode.PER_NODE)
    with pytest.raises(ClusterStagingError, match="failed verification") as failed:
        stage_across_nodes(parse_model_source(REPO), config, node_ids)
    assert all(not item.ok for item in failed.value.nodes)
    listing = list_entries_across_nodes(config, node_ids)
    assert len(listing) == 2
    assert all(
        entry.state is EntryState.PARTIAL for entries in listing.values() for entry in entries
    )


def test_each_node_lists_its_cache(node_ids, hub: LocalHub, tmp_path: Path):
    config = config_for(tmp_path, hub, mode=StagingMode.PER_NODE)
    stage_across_nodes(parse_model_source(REPO), config, node_ids)
    listing = list_entries_across_nodes(config, node_ids)
    assert sorted(label[-8:] for label in listing) == sorted(node_id[:8] for node_id in node_ids)
    for entries in listing.values():
        assert [entry.state for entry in entries] == [EntryState.STAGED]
