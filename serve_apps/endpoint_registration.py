"""An engine replica's direct HTTP port: listened on, token-guarded, and kept registered.

Shared by the vLLM engine replica (`direct_engine_server.py`) and the fake engine replica
(`fake_engine_server.py`), so both are reached exactly alike: the gateway reads the address
and token from the fleet registry and streams from the replica's own port.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from serve_apps.asgi_listener import AsgiListener
from serve_apps.bearer_token_guard import BearerTokenGuard
from serve_apps.engine_endpoint import EngineEndpoint
from serve_apps.ray_internals import is_head_node

log = logging.getLogger(__name__)


class DirectEndpoint:
    """Serves `app` on this node behind a fresh token and registers the address."""

    def __init__(self) -> None:
        self._listener: AsgiListener | None = None
        self._endpoint: EngineEndpoint | None = None

    async def start(self, app: Any, refresh_period_s: float) -> None:
        from ray import serve

        token = secrets.token_urlsafe(32)
        listener = AsgiListener(BearerTokenGuard(app, token), node_address())
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
        from serve_apps.registry import registry_actor

        try:
            await registry_actor(create=False).register_engine_endpoint.remote(self._endpoint)
        except Exception as exc:
            # Gateways fall back to the handle until a later health check registers again.
            log.warning("could not register the direct endpoint: %r", exc)

    async def stop(self) -> None:
        endpoint, self._endpoint = self._endpoint, None
        if endpoint is not None:
            from serve_apps.registry import registry_actor

            try:
                await registry_actor(create=False).unregister_engine_endpoint.remote(
                    endpoint.app_name, endpoint.replica_id
                )
            except Exception as exc:
                log.warning("could not unregister the direct endpoint: %r", exc)
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None


def node_address() -> str:
    """Where the direct port listens: loopback on the head node, else the node's address.

    Gateway replicas run on the head node, so an engine replica there needs no port beyond
    loopback (and a head `up` started locally exposes none). Elsewhere it must be reachable
    from the head, on the address the node joined the cluster with; the token guards it."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    for node in ray.nodes():  # type: ignore[no-untyped-call]
        if node.get("NodeID") != node_id:
            continue
        if is_head_node(node):
            return "127.0.0.1"
        if node.get("NodeManagerAddress"):
            return str(node["NodeManagerAddress"])
    fallback: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    return fallback
