"""Where an engine replica's direct port listens (`serve_apps/engine/endpoint_registration.py`).

On the head, loopback while the head is the only ingress node (or the ingress set is not
known: a stack from before ingress nodes, a registry that lost its facts); the node's own
address as soon as a gateway elsewhere must reach it. A non-head node listens on loopback
only when the ingress addresses are its own alone (a fault-tolerant head's data node,
whose gateway is beside it), else on its own address. The ingress set is read from the
registry's `endpoints` fact, ignoring anything malformed there.
"""

from __future__ import annotations

from typing import Any

import pytest

from cluster.startup.ingress_nodes import ingress_nodes
from serve_apps.engine.endpoint_registration import LOOPBACK, direct_bind_address, ingress_ips_of
from serve_apps.internals import HEAD_NODE_RESOURCE
from serve_apps.registry.status_document import ENDPOINTS_FACT

HEAD = "f3" * 28
NODE_A = "1a" * 28
HEAD_IP = "10.0.0.1"
OTHER_IP = "10.0.0.2"


def ray_node(node_id: str, ip: str, *, head: bool = False, ingress: bool = False) -> dict[str, Any]:
    """One `ray.nodes()` entry as Ray returns it; the head offers Ray's head resource."""
    resources = {"CPU": 4.0, f"node:{ip}": 1.0} | ({HEAD_NODE_RESOURCE: 1.0} if head else {})
    labels = {"ray.io/node-id": node_id} | ({"switchyard.io/role": "ingress"} if ingress else {})
    return {
        "NodeID": node_id,
        "Alive": True,
        "NodeManagerAddress": ip,
        "NodeManagerHostname": f"box-{node_id[:4]}",
        "Resources": resources,
        "Labels": labels,
    }


def recorded(entries: list[dict[str, Any]], head_host: str = HEAD_IP) -> dict[str, Any]:
    """The registry's facts after `up` resolved the ingress nodes of `entries`."""
    nodes = ingress_nodes(entries, (), head_host=head_host, port=8000, scheme="http")
    return {ENDPOINTS_FACT: [n.to_json() for n in nodes], "other": "fact"}


# ------------------------------------------------------------------------------ the head


def test_the_head_listens_on_loopback_while_it_is_the_only_ingress_node() -> None:
    found = direct_bind_address(on_head=True, node_ip=HEAD_IP, ingress_ips={HEAD_IP})
    assert found == LOOPBACK == "127.0.0.1"


@pytest.mark.parametrize("unknown", [frozenset(), set(), (), [""]])
def test_an_unknown_or_empty_ingress_set_is_taken_as_the_head_alone(unknown: Any) -> None:
    assert direct_bind_address(on_head=True, node_ip=HEAD_IP, ingress_ips=unknown) == LOOPBACK


def test_the_head_listens_on_its_address_when_another_ingress_node_exists() -> None:
    both = {HEAD_IP, OTHER_IP}
    assert direct_bind_address(on_head=True, node_ip=HEAD_IP, ingress_ips=both) == HEAD_IP


def test_the_head_listens_on_its_address_when_another_node_is_the_only_ingress() -> None:
    only_other = {OTHER_IP}
    assert direct_bind_address(on_head=True, node_ip=HEAD_IP, ingress_ips=only_other) == HEAD_IP


# ------------------------------------------------------------------------- other nodes


@pytest.mark.parametrize(
    "ingress", [frozenset(), frozenset({HEAD_IP}), frozenset({HEAD_IP, OTHER_IP})]
)
def test_a_node_other_than_the_head_listens_on_its_own_address_for_gateways_elsewhere(
    ingress: frozenset[str],
) -> None:
    assert direct_bind_address(on_head=False, node_ip=OTHER_IP, ingress_ips=ingress) == OTHER_IP


def test_a_node_whose_address_is_the_only_ingress_address_listens_on_loopback() -> None:
    """The data node of a fault-tolerant head: the only gateway is its own."""
    alone = frozenset({OTHER_IP})
    assert direct_bind_address(on_head=False, node_ip=OTHER_IP, ingress_ips=alone) == LOOPBACK


# ---------------------------------------------------------------- reading the ingress set


def test_the_ingress_addresses_are_read_from_the_endpoints_fact() -> None:
    facts = recorded([ray_node(HEAD, HEAD_IP, head=True), ray_node(NODE_A, OTHER_IP, ingress=True)])
    assert ingress_ips_of(facts) == frozenset({HEAD_IP, OTHER_IP})


def test_no_endpoints_fact_means_an_unknown_ingress_set() -> None:
    assert ingress_ips_of({}) == frozenset()
    assert ingress_ips_of({"other": "fact"}) == frozenset()


@pytest.mark.parametrize(
    "value",
    [None, "10.0.0.2", {"node_ip": "10.0.0.2"}, 7, ("10.0.0.2",)],
)
def test_an_endpoints_fact_that_is_not_a_list_is_ignored(value: Any) -> None:
    assert ingress_ips_of({ENDPOINTS_FACT: value}) == frozenset()


def test_malformed_entries_of_the_endpoints_fact_are_ignored() -> None:
    entries = [
        "10.0.0.7",
        None,
        ["node_ip", "10.0.0.8"],
        {"url": "http://10.0.0.9:8000"},
        {"node_ip": ""},
        {"node_ip": None},
        {"node_ip": OTHER_IP, "head": False},
    ]
    assert ingress_ips_of({ENDPOINTS_FACT: entries}) == frozenset({OTHER_IP})


# ------------------------------------------------------------------ from `up` to the port


def test_a_head_alone_records_an_ingress_set_that_keeps_its_port_on_loopback() -> None:
    facts = recorded([ray_node(HEAD, HEAD_IP, head=True), ray_node(NODE_A, OTHER_IP)])
    ips = ingress_ips_of(facts)
    assert direct_bind_address(on_head=True, node_ip=HEAD_IP, ingress_ips=ips) == LOOPBACK


def test_a_second_ingress_node_opens_the_heads_port_on_its_address() -> None:
    entries = [ray_node(HEAD, HEAD_IP, head=True), ray_node(NODE_A, OTHER_IP, ingress=True)]
    ips = ingress_ips_of(recorded(entries))
    assert direct_bind_address(on_head=True, node_ip=HEAD_IP, ingress_ips=ips) == HEAD_IP
    assert direct_bind_address(on_head=False, node_ip=OTHER_IP, ingress_ips=ips) == OTHER_IP


def test_a_wildcard_head_host_still_records_the_heads_own_address() -> None:
    facts = recorded([ray_node(HEAD, HEAD_IP, head=True)], head_host="0.0.0.0")
    ips = ingress_ips_of(facts)
    assert ips == frozenset({HEAD_IP})
    assert direct_bind_address(on_head=True, node_ip=HEAD_IP, ingress_ips=ips) == LOOPBACK
