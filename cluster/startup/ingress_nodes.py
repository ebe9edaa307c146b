"""Which nodes serve the endpoint: the ingress nodes, each with its own gateway app.

A node is ingress when `node_roles.is_ingress` says so (the head by default, the Ray label
`switchyard.io/role=ingress`, or an inventory override). Resolved once by `up`, from
`ray.nodes()` and the overrides, and recorded in the registry (`ENDPOINTS_FACT`) for
`status` and for engine replicas choosing the address of their direct port. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cluster.inventory.node_roles import NodeIdentity, is_ingress
from cluster.inventory.overrides import NodeOverride
from cluster.inventory.ray_node_entry import identity_of
from domain.endpoint_url import WILDCARD_HOSTS, endpoint_url
from serve_apps.gateway.serve_deployment import gateway_app_name


@dataclass(frozen=True)
class IngressNode:
    """One node running gateway replicas on the endpoint port."""

    node_id: str
    node_ip: str
    is_head: bool
    app_name: str
    host: str
    """What its gateway replicas bind."""
    url: str
    """Where clients reach it (no `/v1`)."""
    fallback: bool = False
    """The head, serving only because no node is declared ingress."""

    def to_json(self) -> dict[str, Any]:
        """Its entry in the registry's `endpoints` fact."""
        return {
            "node": self.node_id[:12],
            "node_id": self.node_id,
            "node_ip": self.node_ip,
            "url": self.url,
            "app": self.app_name,
            "head": self.is_head,
        }


def ingress_nodes(
    entries: Sequence[Mapping[str, Any]],
    overrides: Iterable[NodeOverride],
    *,
    head_host: str,
    port: int,
    scheme: str,
    head_serves: bool = True,
) -> tuple[IngressNode, ...]:
    """The alive ingress nodes, the head first, then by node id.

    A fault-tolerant head keeps traffic off itself (`head_serves` False): only the other
    ingress nodes, none of them when there are none (`up` refuses that cluster).

    The head binds `head_host` and keeps the endpoint URL `up` always printed. Another node
    binds `head_host` when that is a wildcard (the operator asked for every interface), else
    its own address: `head_host` is the head's, which that node does not have. When no node
    is ingress (overrides said `ingress: false` to all of them), the head serves anyway,
    marked `fallback`: an endpoint nobody can reach would make the stack useless.
    """
    chosen = tuple(overrides)
    alive = [identity_of(e) for e in entries if e.get("Alive", True)]
    # A node Ray lists without an address could neither be bound nor be reached.
    found = [n for n in alive if is_ingress(n, chosen) and (n.is_head or n.node_ip)]
    if not head_serves:
        # A node on the head's machine (the local data node) serves where the head would
        # have: the address `up` printed, which the head no longer binds.
        head_ips = {n.node_ip for n in alive if n.is_head}
        return tuple(
            _node(n, head_host, port, scheme, False, on_head_machine=n.node_ip in head_ips)
            for n in sorted(found, key=lambda n: n.node_id)
            if not n.is_head
        )
    fallback = not found
    if fallback:
        # Ray always lists its head; an empty id still pins by the head resource.
        found = [n for n in alive if n.is_head]
    ordered = sorted(found, key=lambda n: (not n.is_head, n.node_id))
    nodes = [_node(n, head_host, port, scheme, fallback) for n in ordered]
    if not nodes:
        # No head entry at all (not a real Ray cluster): the head's app, as before roles.
        nodes = [
            IngressNode(
                node_id="",
                node_ip="",
                is_head=True,
                app_name=gateway_app_name("", True),
                host=head_host,
                url=endpoint_url(scheme, head_host, port),
                fallback=True,
            )
        ]
    return tuple(nodes)


def _node(
    n: NodeIdentity,
    head_host: str,
    port: int,
    scheme: str,
    fallback: bool,
    *,
    on_head_machine: bool = False,
) -> IngressNode:
    as_head = n.is_head or on_head_machine
    return IngressNode(
        node_id=n.node_id,
        node_ip=n.node_ip,
        is_head=n.is_head,
        app_name=gateway_app_name(n.node_id, n.is_head),
        host=_bind_host(as_head, n.node_ip, head_host),
        url=endpoint_url(scheme, head_host if as_head else n.node_ip, port),
        fallback=fallback,
    )


def _bind_host(is_head: bool, node_ip: str, head_host: str) -> str:
    if is_head or head_host in WILDCARD_HOSTS:
        return head_host
    return node_ip
