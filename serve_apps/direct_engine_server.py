"""The engine replica: Ray Serve LLM's `LLMServer` plus vLLM's own HTTP app on a port.

`LLMServer` keeps doing everything it does (engine start, health checks, engine metrics,
the handle methods the manager's warm-up and the gateway's fallback call). On top of it the
replica serves the same engine through vLLM's OpenAI app (`VLLMEngine.build_asgi_app`, the
code `vllm serve` runs) on a port of its node, and registers that address with the fleet
registry so gateways can stream from it without a Ray Serve handle hop per token
(`engine_endpoint.py`). Only `model_app.py` refers to this class (as Ray Serve LLM's
`deployment_cls`), so Ray stays out of everything else.
"""

from __future__ import annotations

import logging
import secrets

from ray.serve.llm import LLMServer

from serve_apps.asgi_listener import AsgiListener
from serve_apps.bearer_token_guard import BearerTokenGuard
from serve_apps.engine_endpoint import EngineEndpoint
from serve_apps.ray_internals import (
    is_head_node,
    llm_server_asgi_app,
    llm_server_health_check_period_s,
)

log = logging.getLogger(__name__)


class DirectStreamingLLMServer(LLMServer):
    """`LLMServer` that also serves its engine over HTTP and registers the address."""

    _listener: AsgiListener | None = None
    _endpoint: EngineEndpoint | None = None

    async def start(self) -> None:
        await super().start()  # type: ignore[no-untyped-call]
        try:
            await self._serve_http()
        except Exception:
            # The replica still serves through its handle; only the fast path is missing.
            log.exception("could not start the direct HTTP endpoint; handle path only")

    async def _serve_http(self) -> None:
        from ray import serve

        token = secrets.token_urlsafe(32)
        app = await llm_server_asgi_app(self)
        listener = AsgiListener(BearerTokenGuard(app, token), _node_address())
        await listener.start()
        self._listener = listener
        context = serve.get_replica_context()
        self._endpoint = EngineEndpoint(
            app_name=context.app_name,
            replica_id=context.replica_id.unique_id,
            url=listener.url,
            token=token,
            refresh_period_s=llm_server_health_check_period_s(self),
        )
        await self._register()
        log.info("direct HTTP endpoint of %s at %s", context.app_name, listener.url)

    async def _register(self) -> None:
        if self._endpoint is None:
            return
        from serve_apps.registry import registry_actor

        try:
            await registry_actor(create=False).register_engine_endpoint.remote(self._endpoint)
        except Exception as exc:
            # Gateways fall back to the handle until a later health check registers again.
            log.warning("could not register the direct endpoint: %r", exc)

    async def check_health(self) -> None:
        await super().check_health()
        # Re-registering on every health check refreshes the entry's age (the registry
        # drops entries that stop being refreshed) and refills a restarted registry.
        await self._register()

    async def __del__(self) -> None:
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
        await super().__del__()


def _node_address() -> str:
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
