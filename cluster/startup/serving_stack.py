"""What `up` starts on the cluster it has joined, besides the manager and the registry:
Ray Serve without its HTTP proxy, and one gateway application per ingress node.

The gateway replicas listen on the endpoint themselves (serve_apps/gateway/serve_deployment.py);
every other Serve call goes through handles, so Serve's own proxy is never started.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from cluster.inventory.overrides import NodeOverride
from cluster.startup.ingress_nodes import IngressNode, ingress_nodes
from serve_apps.gateway.gateway_settings import GatewaySettings

Report = Callable[[str], None]


def start_serve() -> None:
    """Ray Serve's controller, with no HTTP proxy."""
    from ray import serve

    serve.start(proxy_location="Disabled")


def cluster_ingress_nodes(
    overrides: Iterable[NodeOverride],
    *,
    head_host: str,
    port: int,
    scheme: str,
    head_serves: bool = True,
) -> tuple[IngressNode, ...]:
    """The ingress nodes of the cluster this process has joined, from Ray's node table and
    the operator's overrides."""
    import ray

    return ingress_nodes(
        ray.nodes(),  # type: ignore[no-untyped-call]
        overrides,
        head_host=head_host,
        port=port,
        scheme=scheme,
        head_serves=head_serves,
    )


def deploy_gateways(
    settings: GatewaySettings, ingress: tuple[IngressNode, ...], port: int, report: Report
) -> None:
    """One gateway app per ingress node, then the apps of nodes no longer ingress removed (an
    earlier `up` with other roles)."""
    from ray import serve
    from ray.serve.api import RunTarget

    from serve_apps.gateway.serve_deployment import build_gateway_app, is_gateway_app

    for node in ingress:
        where = "the head" if node.is_head else f"node {node.node_id[:12]}"
        report(f"deploying the gateway on {node.url} ({where}) ...")
    serve.run_many(
        [
            RunTarget(
                target=build_gateway_app(
                    settings,
                    node.host,
                    port,
                    node_id=None if node.is_head else node.node_id,
                ),
                name=node.app_name,
                route_prefix=None,
            )
            for node in ingress
        ],
        wait_for_applications_running=True,
    )
    wanted = {n.app_name for n in ingress}
    for name in serve.status().applications:
        if is_gateway_app(name) and name not in wanted:
            report(f"removing {name}: its node is no longer an ingress node")
            serve.delete(name)
