"""What the inventory says of a node beyond its hardware (`cluster/inventory/node_roles.py`).

A `ray.nodes()` entry is read as a node identity (id, address, hostname, labels, whether it
is the head); the operator's overrides then give it a cache root and decide whether it is an
ingress node, the last matching override winning. Weights are staged on the alive nodes that
offer the fleet's accelerator (`cluster/ray_adapters/ray_nodes.py`), each with its own cache root
(`cluster/staging/replica_weights.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from pydantic import ValidationError

from cluster.inventory.node_roles import NodeIdentity, cache_dir_for, is_ingress
from cluster.inventory.overrides import NodeOverride, load_inventory_config
from cluster.inventory.ray_node_entry import identity_of
from cluster.ray_adapters.ray_nodes import weight_nodes
from cluster.staging.replica_weights import node_config
from cluster.staging.staging_config import StagingConfig
from domain.exit_codes import UserInputError
from tests.support.ray_node_entries import HEAD, NODE_A, NODE_B, ray_node

DEFAULT_CACHE = Path("/var/cache/switchyard")


def node(
    node_id: str = NODE_A,
    ip: str = "10.0.0.2",
    *,
    head: bool = False,
    labels: Mapping[str, str] | None = None,
) -> NodeIdentity:
    return identity_of(ray_node(node_id, ip, head=head, labels=labels))


# ------------------------------------------------------------------- reading a Ray entry


def test_an_entry_gives_its_id_address_hostname_and_sorted_labels() -> None:
    entry = ray_node(NODE_A, "10.0.0.2", labels={"rack": "r1", "switchyard.io/role": "ingress"})
    assert identity_of(entry) == NodeIdentity(
        node_id=NODE_A,
        node_ip="10.0.0.2",
        labels=(("rack", "r1"), ("ray.io/node-id", NODE_A), ("switchyard.io/role", "ingress")),
        hostname="box-2",
        is_head=False,
    )


def test_the_head_is_the_entry_offering_rays_head_resource() -> None:
    assert identity_of(ray_node(HEAD, "10.0.0.1", head=True)).is_head
    assert not identity_of(ray_node(NODE_A, "10.0.0.2")).is_head


def test_missing_fields_read_as_empty_values() -> None:
    assert identity_of({"Labels": None, "Resources": None}) == NodeIdentity(node_id="", node_ip="")


# ------------------------------------------------------------------------ the cache root


def test_without_a_matching_override_the_cache_root_is_the_default() -> None:
    other = NodeOverride(node_ip="10.0.0.9", cache_dir=Path("/mnt/other"))
    assert cache_dir_for(node(), (), DEFAULT_CACHE) == DEFAULT_CACHE
    assert cache_dir_for(node(), (other,), DEFAULT_CACHE) == DEFAULT_CACHE


@pytest.mark.parametrize(
    "selector",
    [
        {"node_ip": "10.0.0.2"},
        {"node_name": "box-2"},
        {"node_name": NODE_A[:8]},
        {"label": "rack=r1"},
        {"label": f"ray.io/node-id={NODE_A}"},
    ],
)
def test_a_node_named_by_ip_name_id_prefix_or_label_gets_its_cache_root(
    selector: dict[str, str],
) -> None:
    override = NodeOverride.model_validate({**selector, "cache_dir": "/mnt/nvme/cache"})
    found = cache_dir_for(node(labels={"rack": "r1"}), (override,), DEFAULT_CACHE)
    assert found == Path("/mnt/nvme/cache")


def test_the_last_matching_override_that_sets_a_cache_root_wins() -> None:
    overrides = (
        NodeOverride(label="rack=r1", cache_dir=Path("/mnt/first")),
        NodeOverride(node_ip="10.0.0.2", cache_dir=Path("/mnt/second")),
        NodeOverride(node_ip="10.0.0.2", disk_free_gib=10),  # sets no cache root
        NodeOverride(node_ip="10.0.0.9", cache_dir=Path("/mnt/not-this-node")),
    )
    assert cache_dir_for(node(labels={"rack": "r1"}), overrides, DEFAULT_CACHE) == Path(
        "/mnt/second"
    )


def test_a_relative_cache_root_is_refused_naming_the_field() -> None:
    with pytest.raises(UserInputError) as caught:
        load_inventory_config({"overrides": [{"node_ip": "10.0.0.2", "cache_dir": "cache"}]})
    message = str(caught.value)
    assert message.startswith("inventory.overrides.0.cache_dir:")
    assert "'cache'" in message
    assert "absolute" in message
    with pytest.raises(ValidationError) as direct:
        NodeOverride.model_validate({"node_ip": "10.0.0.2", "cache_dir": "./cache"})
    assert [error["loc"] for error in direct.value.errors()] == [("cache_dir",)]


# ------------------------------------------------------------------------- ingress role


def test_the_head_is_ingress_unless_an_override_says_false() -> None:
    head = node(HEAD, "10.0.0.1", head=True)
    assert is_ingress(head, ())
    assert not is_ingress(head, (NodeOverride(node_ip="10.0.0.1", ingress=False),))


def test_a_node_without_the_role_label_is_not_ingress() -> None:
    assert not is_ingress(node(), ())
    assert not is_ingress(node(labels={"switchyard.io/role": "worker"}), ())


@pytest.mark.parametrize("roles", ["ingress", "ingress.worker", "worker.ingress"])
def test_a_node_whose_role_label_lists_ingress_is_ingress(roles: str) -> None:
    assert is_ingress(node(labels={"switchyard.io/role": roles}), ())


@pytest.mark.parametrize("roles", ["ingresses", "no-ingress", "worker,ingress"])
def test_ingress_must_be_a_whole_role_of_the_dot_separated_label(roles: str) -> None:
    assert not is_ingress(node(labels={"switchyard.io/role": roles}), ())


def test_an_override_makes_any_node_ingress_or_takes_a_labelled_one_out() -> None:
    assert is_ingress(node(), (NodeOverride(node_name=NODE_A[:12], ingress=True),))
    labelled = node(labels={"switchyard.io/role": "ingress"})
    assert not is_ingress(labelled, (NodeOverride(node_ip="10.0.0.2", ingress=False),))


def test_the_last_matching_override_on_ingress_wins() -> None:
    on = NodeOverride(label="rack=r1", ingress=True)
    off = NodeOverride(node_ip="10.0.0.2", ingress=False)
    silent = NodeOverride(node_ip="10.0.0.2", cache_dir=Path("/mnt/x"))  # says nothing of it
    elsewhere = NodeOverride(node_ip="10.0.0.9", ingress=True)
    racked = node(labels={"rack": "r1"})
    assert not is_ingress(racked, (on, off, silent, elsewhere))
    assert is_ingress(racked, (off, on, silent, elsewhere))


# ------------------------------------------------------------- the nodes staging weights


def test_weights_go_to_the_alive_nodes_offering_the_resource_head_first_then_by_id() -> None:
    entries = [
        ray_node(NODE_B, "10.0.0.3", resources={"GPU": 8.0}),
        ray_node(HEAD, "10.0.0.1", head=True, resources={"GPU": 8.0}),
        ray_node(NODE_A, "10.0.0.2", resources={"GPU": 8.0}),
    ]
    assert [n.node_id for n in weight_nodes(entries, "GPU")] == [HEAD, NODE_A, NODE_B]


def test_a_node_without_the_resource_or_with_none_left_of_it_stages_nothing() -> None:
    entries = [
        ray_node(HEAD, "10.0.0.1", head=True),
        ray_node(NODE_A, "10.0.0.2", resources={"GPU": 0.0}),
        ray_node(NODE_B, "10.0.0.3", resources={"GPU": 2.0}),
    ]
    assert [n.node_id for n in weight_nodes(entries, "GPU")] == [NODE_B]


def test_the_head_alone_stages_when_no_node_offers_the_resource() -> None:
    entries = [ray_node(NODE_A, "10.0.0.2"), ray_node(HEAD, "10.0.0.1", head=True)]
    chosen = weight_nodes(entries, "switchyard_standin")
    assert [(n.node_id, n.is_head) for n in chosen] == [(HEAD, True)]


def test_dead_nodes_stage_nothing() -> None:
    entries = [
        ray_node(HEAD, "10.0.0.1", head=True),
        ray_node(NODE_A, "10.0.0.2", alive=False, resources={"GPU": 8.0}),
        ray_node(NODE_B, "10.0.0.3", resources={"GPU": 8.0}),
    ]
    assert [n.node_id for n in weight_nodes(entries, "GPU")] == [NODE_B]
    only_dead = [ray_node(HEAD, "10.0.0.1", head=True), entries[1]]
    assert [n.node_id for n in weight_nodes(only_dead, "GPU")] == [HEAD]


# ---------------------------------------------------------------- a node's staging config


def test_a_node_without_a_cache_root_override_keeps_the_same_staging_config() -> None:
    staging = StagingConfig(cache_dir=DEFAULT_CACHE)
    elsewhere = NodeOverride(node_ip="10.0.0.9", cache_dir=Path("/mnt/other"))
    assert node_config(staging, node(), ()) is staging
    assert node_config(staging, node(), (elsewhere,)) is staging
    same = NodeOverride(node_ip="10.0.0.2", cache_dir=DEFAULT_CACHE)
    assert node_config(staging, node(), (same,)) is staging


def test_a_node_with_a_cache_root_override_gets_a_copy_with_its_root() -> None:
    staging = StagingConfig(cache_dir=DEFAULT_CACHE, reserve_gib=5, allow_eviction=True)
    override = NodeOverride(node_ip="10.0.0.2", cache_dir=Path("/mnt/nvme/cache"))
    mine = node_config(staging, node(), (override,))
    assert mine.cache_dir == Path("/mnt/nvme/cache")
    assert mine.model_dump(exclude={"cache_dir"}) == staging.model_dump(exclude={"cache_dir"})
    assert staging.cache_dir == DEFAULT_CACHE
