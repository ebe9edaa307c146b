"""An engine replica's direct HTTP port: listened on, token-guarded, and kept registered.

Shared by the vLLM engine replica (`engine/vllm_replica.py`) and the fake engine replica
(`engine/fake_engine_replica.py`), so both are reached exactly alike: the gateway reads the address
and token from the fleet registry and streams from the replica's own port.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Collection, Mapping
from typing import Any

from serve_apps.asgi_listener import AsgiListener
from serve_apps.engine.bearer_token_guard import BearerTokenGuard
from serve_apps.internals import is_head_node
from serve_apps.registry.engine_endpoint import EngineEndpoint
from serve_apps.registry.status_document import ENDPOINTS_FACT

log = logging.getLogger(__name__)


class DirectEndpoint:
    """Serves `app` on this node behind a fresh token and registers the address."""

    def __init__(self) -> None:
        self._listener: AsgiListener | None = None
        self._endpoint: EngineEndpoint | None = None

    async def start(self, app: Any, refresh_period_s: float) -> None:
        from ray import serve

        token = secrets.token_urlsafe(32)
        listener = AsgiListener(BearerTokenGuard(app, token), await node_address())
        await listener.start()
        self._listener = listener
        context = serve.get_replica_context()
        self._endpoint = EngineEndpoint(
            app_name=context.app_name,
            replica_id=context.replica_id.unique_id,
            url=listener.url,
            token=token,
            refresh_period_s=refresh_period_s,
        )
        await self.register()
        log.info("direct HTTP endpoint of %s at %s", context.app_name, listener.url)

    @property
    def serving(self) -> bool:
        return self._listener is not None and self._listener.serving

    async def register(self) -> None:
        """Called on every health check: refreshes the entry's age (the registry drops
        entries that stop being refreshed) and refills a restarted registry."""
        if self._endpoint is None:
            return
        from serve_apps.registry.registry_actor import registry_actor

        try:
            await registry_actor(create=False).register_engine_endpoint.remote(self._endpoint)
        except Exception as exc:
            # Gateways fall back to the handle until a later health check registers again.
            log.warning("could not register the direct endpoint: %r", exc)

    async def stop(self) -> None:
        endpoint, self._endpoint = self._endpoint, None
        if endpoint is not None:
            from serve_apps.registry.registry_actor import registry_actor

            try:
                await registry_actor(create=False).unregister_engine_endpoint.remote(
                    endpoint.app_name, endpoint.replica_id
                )
            except Exception as exc:
                log.warning("could not unregister the direct endpoint: %r", exc)
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None


LOOPBACK = "127.0.0.1"
_FACTS_TIMEOUT_S = 10.0


def direct_bind_address(*, on_head: bool, node_ip: str, ingress_ips: Collection[str]) -> str:
    """Where an engine replica's direct port listens: loopback while every gateway that
    must reach it runs on its own machine (the head while it is the only ingress node, or
    a node whose address is the only ingress address: a fault-tolerant head's data node,
    which shares it with nothing else), else the node's address.

    Gateway replicas run on the ingress nodes; on the head alone, an engine there needs no
    port beyond loopback (and a head `up` started locally exposes none). Every other
    gateway must reach the port on the address the node joined the cluster with; the token
    guards it. An unknown ingress set (empty: a stack from before ingress nodes, or a
    registry that restarted and lost its facts) is taken as the head alone, as before."""
    others = {ip for ip in ingress_ips if ip and ip != node_ip}
    local = on_head or node_ip in ingress_ips
    return LOOPBACK if local and not others else node_ip


def ingress_ips_of(facts: Mapping[str, Any]) -> frozenset[str]:
    """The addresses of the ingress nodes in the registry's facts (none when unrecorded)."""
    recorded = facts.get(ENDPOINTS_FACT)
    if not isinstance(recorded, list):
        return frozenset()
    return frozenset(
        str(e["node_ip"]) for e in recorded if isinstance(e, dict) and e.get("node_ip")
    )


async def _ingress_ips() -> frozenset[str]:
    from serve_apps.registry.registry_actor import registry_actor

    try:
        facts: dict[str, Any] = await asyncio.wait_for(
            registry_actor(create=False).facts.remote(), _FACTS_TIMEOUT_S
        )
    except Exception as exc:
        log.warning("could not read the ingress nodes from the registry: %r", exc)
        return frozenset()
    return ingress_ips_of(facts)


async def node_address() -> str:
    """This node's `direct_bind_address`, from Ray's node table and the registry."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    for node in ray.nodes():  # type: ignore[no-untyped-call]
        if node.get("NodeID") != node_id:
            continue
        node_ip = str(node.get("NodeManagerAddress") or "")
        if is_head_node(node):
            return direct_bind_address(
                on_head=True, node_ip=node_ip or LOOPBACK, ingress_ips=await _ingress_ips()
            )
        if node_ip:
            return direct_bind_address(
                on_head=False, node_ip=node_ip, ingress_ips=await _ingress_ips()
            )
    fallback: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    return fallback
