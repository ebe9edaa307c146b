"""Which nodes serve the endpoint (`cluster/startup/ingress_nodes.py`) and how their gateway apps
are named and pinned (`serve_apps/gateway/serve_deployment.py`).

The ingress nodes are the alive ones `is_ingress` accepts, the head first, then by node id.
The head binds the configured host; another node binds its own address unless that host is
a wildcard. When overrides take every node out, the head serves anyway, marked `fallback`.
A fault-tolerant head serves no traffic (`head_serves` False): only the other ingress
nodes do, a node on the head's machine where the head would have. Each ingress node has
its own gateway app, pinned to it.
"""

from __future__ import annotations

from typing import Any

import pytest

from cluster.inventory.overrides import NodeOverride
from cluster.startup.ingress_nodes import IngressNode, ingress_nodes
from domain.endpoint_url import endpoint_url
from serve_apps.gateway.serve_deployment import (
    GATEWAY_APP_NAME,
    gateway_actor_options,
    gateway_app_name,
    is_gateway_app,
)
from serve_apps.internals import HEAD_NODE_RESOURCE, head_node_resources
from tests.support.ray_node_entries import HEAD, NODE_A, NODE_B, ray_node

INGRESS = {"switchyard.io/role": "ingress"}


def head(ip: str = "10.0.0.1") -> dict[str, Any]:
    return ray_node(HEAD, ip, head=True)


def resolve(
    entries: list[dict[str, Any]],
    overrides: tuple[NodeOverride, ...] = (),
    *,
    head_host: str = "10.0.0.1",
    scheme: str = "http",
) -> tuple[IngressNode, ...]:
    return ingress_nodes(entries, overrides, head_host=head_host, port=8000, scheme=scheme)


# ------------------------------------------------------------------- which nodes serve


def test_a_lone_head_serves_on_the_configured_host() -> None:
    assert resolve([head()]) == (
        IngressNode(
            node_id=HEAD,
            node_ip="10.0.0.1",
            is_head=True,
            app_name=GATEWAY_APP_NAME,
            host="10.0.0.1",
            url="http://10.0.0.1:8000",
            fallback=False,
        ),
    )


def test_unlabelled_nodes_do_not_serve() -> None:
    nodes = resolve([head(), ray_node(NODE_A, "10.0.0.2")])
    assert [n.node_id for n in nodes] == [HEAD]


def test_the_head_comes_first_then_the_other_nodes_by_id() -> None:
    entries = [
        ray_node(NODE_B, "10.0.0.3", labels=INGRESS),
        head(),
        ray_node(NODE_A, "10.0.0.2", labels=INGRESS),
    ]
    assert [n.node_id for n in resolve(entries)] == [HEAD, NODE_A, NODE_B]


def test_another_node_binds_and_is_reached_on_its_own_address() -> None:
    _, other = resolve([head(), ray_node(NODE_A, "10.0.0.2", labels=INGRESS)])
    assert (other.is_head, other.host, other.url) == (False, "10.0.0.2", "http://10.0.0.2:8000")
    assert not other.fallback


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::"])
def test_with_a_wildcard_host_every_node_binds_the_wildcard(wildcard: str) -> None:
    entries = [head(), ray_node(NODE_A, "10.0.0.2", labels=INGRESS)]
    the_head, other = resolve(entries, head_host=wildcard)
    assert (the_head.host, the_head.url) == (wildcard, "http://127.0.0.1:8000")
    assert (other.host, other.url) == (wildcard, "http://10.0.0.2:8000")


def test_an_override_can_make_a_node_ingress_or_take_the_head_out() -> None:
    entries = [head(), ray_node(NODE_A, "10.0.0.2")]
    overrides = (
        NodeOverride(node_ip="10.0.0.2", ingress=True),
        NodeOverride(node_ip="10.0.0.1", ingress=False),
    )
    nodes = resolve(entries, overrides)
    assert [(n.node_id, n.fallback) for n in nodes] == [(NODE_A, False)]


def test_the_head_serves_as_a_fallback_when_overrides_take_every_node_out() -> None:
    entries = [head(), ray_node(NODE_A, "10.0.0.2", labels=INGRESS)]
    overrides = (
        NodeOverride(node_ip="10.0.0.1", ingress=False),
        NodeOverride(label="switchyard.io/role=ingress", ingress=False),
    )
    (only,) = resolve(entries, overrides)
    assert (only.node_id, only.is_head, only.host, only.fallback) == (HEAD, True, "10.0.0.1", True)
    assert only.app_name == GATEWAY_APP_NAME


def test_dead_nodes_do_not_serve() -> None:
    entries = [head(), ray_node(NODE_A, "10.0.0.2", alive=False, labels=INGRESS)]
    assert [n.node_id for n in resolve(entries)] == [HEAD]


def test_a_node_listed_without_an_address_does_not_serve() -> None:
    entries = [head(), ray_node(NODE_A, "", labels=INGRESS)]
    assert [n.node_id for n in resolve(entries)] == [HEAD]


def test_without_a_head_entry_the_heads_app_serves_on_the_configured_host() -> None:
    (only,) = resolve([ray_node(NODE_A, "10.0.0.2")], head_host="127.0.0.1")
    assert only == IngressNode(
        node_id="",
        node_ip="",
        is_head=True,
        app_name=GATEWAY_APP_NAME,
        host="127.0.0.1",
        url="http://127.0.0.1:8000",
        fallback=True,
    )


# ------------------------------------------------------- a fault-tolerant head serves none


def test_a_head_that_does_not_serve_leaves_the_endpoint_to_the_other_ingress_nodes() -> None:
    entries = [head(), ray_node(NODE_B, "10.0.0.3", labels=INGRESS), ray_node(NODE_A, "10.0.0.2")]
    nodes = ingress_nodes(
        entries, (), head_host="10.0.0.1", port=8000, scheme="http", head_serves=False
    )
    assert [(n.node_id, n.host, n.url, n.is_head) for n in nodes] == [
        (NODE_B, "10.0.0.3", "http://10.0.0.3:8000", False)
    ]


def test_the_data_node_on_the_heads_machine_serves_where_the_head_would_have() -> None:
    """The local data node shares the head's address: it binds the configured host (say
    127.0.0.1, which the head advertises as the machine's address) and keeps the URL `up`
    prints."""
    entries = [head("192.0.2.2"), ray_node(NODE_A, "192.0.2.2", labels=INGRESS)]
    (node,) = ingress_nodes(
        entries, (), head_host="127.0.0.1", port=8000, scheme="http", head_serves=False
    )
    assert (node.node_id, node.host, node.url, node.is_head, node.fallback) == (
        NODE_A,
        "127.0.0.1",
        "http://127.0.0.1:8000",
        False,
        False,
    )
    assert node.app_name == gateway_app_name(NODE_A, False)


def test_a_head_that_does_not_serve_and_no_other_ingress_node_leave_no_endpoint() -> None:
    """No fallback to the head here: `up` refuses the cluster in one line."""
    taken_out = (NodeOverride(label="switchyard.io/role=ingress", ingress=False),)
    entries = [head(), ray_node(NODE_A, "10.0.0.2", labels=INGRESS)]
    for cluster, overrides in ((entries[:1], ()), (entries, taken_out)):
        found = ingress_nodes(
            cluster, overrides, head_host="10.0.0.1", port=8000, scheme="http", head_serves=False
        )
        assert found == ()


# -------------------------------------------------------------------- URLs and records


def test_an_ipv6_address_goes_in_brackets_in_the_url_but_not_in_the_bind() -> None:
    entries = [head("fd00::1"), ray_node(NODE_A, "fd00::2", labels=INGRESS)]
    the_head, other = resolve(entries, head_host="fd00::1")
    assert (the_head.host, the_head.url) == ("fd00::1", "http://[fd00::1]:8000")
    assert (other.host, other.url) == ("fd00::2", "http://[fd00::2]:8000")


def test_the_scheme_is_kept_for_every_node() -> None:
    entries = [head(), ray_node(NODE_A, "10.0.0.2", labels=INGRESS)]
    urls = [n.url for n in resolve(entries, scheme="https")]
    assert urls == ["https://10.0.0.1:8000", "https://10.0.0.2:8000"]


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("10.0.0.5", "http://10.0.0.5:9000"),
        ("gpu-box-1", "http://gpu-box-1:9000"),
        ("0.0.0.0", "http://127.0.0.1:9000"),
        ("::", "http://127.0.0.1:9000"),
        ("::1", "http://[::1]:9000"),
    ],
)
def test_an_endpoint_url_reaches_a_wildcard_on_loopback(host: str, url: str) -> None:
    assert endpoint_url("http", host, 9000) == url


def test_the_registry_record_names_node_address_url_app_and_head() -> None:
    _, other = resolve([head(), ray_node(NODE_A, "10.0.0.2", labels=INGRESS)])
    assert other.to_json() == {
        "node": NODE_A[:12],
        "node_id": NODE_A,
        "node_ip": "10.0.0.2",
        "url": "http://10.0.0.2:8000",
        "app": f"switchyard-gateway-{NODE_A[:12]}",
        "head": False,
    }


# ------------------------------------------------------------------------ gateway apps


def test_the_heads_gateway_app_keeps_the_historical_name() -> None:
    assert gateway_app_name(HEAD, True) == "switchyard-gateway"
    assert gateway_app_name("", True) == "switchyard-gateway"


def test_another_nodes_gateway_app_carries_the_start_of_its_id() -> None:
    assert gateway_app_name(NODE_A, False) == "switchyard-gateway-1a1a1a1a1a1a"


def test_every_ingress_node_has_its_own_gateway_app() -> None:
    entries = [
        head(),
        ray_node(NODE_A, "10.0.0.2", labels=INGRESS),
        ray_node(NODE_B, "10.0.0.3", labels=INGRESS),
    ]
    names = [n.app_name for n in resolve(entries)]
    assert len(set(names)) == 3
    assert all(is_gateway_app(name) for name in names)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("switchyard-gateway", True),
        ("switchyard-gateway-1a1a1a1a1a1a", True),
        ("switchyard-gatewayx", False),
        ("my-switchyard-gateway", False),
        ("switchyard-manager", False),
        ("qwen", False),
    ],
)
def test_gateway_apps_are_told_apart_from_model_apps_by_name(name: str, expected: bool) -> None:
    assert is_gateway_app(name) is expected


def test_the_heads_gateway_is_pinned_by_the_head_resource() -> None:
    options = gateway_actor_options(None)
    assert options == {"num_cpus": 0, "resources": head_node_resources()}
    assert HEAD_NODE_RESOURCE in options["resources"]


def test_another_nodes_gateway_is_pinned_by_its_node_id_label() -> None:
    assert gateway_actor_options(NODE_A) == {
        "num_cpus": 0,
        "label_selector": {"ray.io/node-id": NODE_A},
    }
