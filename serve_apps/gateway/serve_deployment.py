"""Ray Serve wiring for the gateway: the only place it is decorated or bound."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domain.tenant_keys import TenantTable
from serve_apps.asgi_listener import AsgiListener
from serve_apps.gateway.app import Gateway, OperatorDocument
from serve_apps.gateway.gateway_metrics import RayGatewayMetrics
from serve_apps.gateway.gateway_settings import GatewaySettings
from serve_apps.internals import (
    head_node_resources,
    running_replicas_by_app,
    running_replicas_in,
    serve_controller,
)
from serve_apps.registry.engine_endpoint import EngineEndpoint
from serve_apps.registry.replica_health import ReplicaHealthView
from serve_apps.registry.route_view import RouteView
from serve_apps.registry.routing_table import RoutingTable
from serve_apps.relay.direct_backend import DirectHttpBackend, EngineEndpointView
from serve_apps.relay.model_backend import Method, ModelBackend, ServeHandleBackend
from serve_apps.tenants.tenant_gate import RemoteUsage, UsageDelta

if TYPE_CHECKING:
    from ray.serve.deployment import Application

log = logging.getLogger(__name__)

GATEWAY_APP_PREFIX = "switchyard-gateway"
"""Every gateway app's name starts with it (`down`, `up` and `status` find them by it)."""
GATEWAY_APP_NAME = GATEWAY_APP_PREFIX
"""The head node's gateway app."""
GATEWAY_DEPLOYMENT_NAME = "gateway"
NODE_ID_LABEL = "ray.io/node-id"
"""Ray's default label of every node (its node id): what pins another node's gateway."""


def gateway_app_name(node_id: str, is_head: bool) -> str:
    """The gateway app of one ingress node: the head's keeps the historical name, another
    node's carries the start of its node id (one app per node, each pinned to it)."""
    return GATEWAY_APP_NAME if is_head else f"{GATEWAY_APP_PREFIX}-{node_id[:12]}"


def is_gateway_app(name: str) -> bool:
    return name == GATEWAY_APP_NAME or name.startswith(f"{GATEWAY_APP_PREFIX}-")


def gateway_actor_options(node_id: str | None) -> dict[str, Any]:
    """Where a gateway's replicas run: on the head (`node_id` None) or on that node.

    Its listeners bind that node's address, so Serve must not place them anywhere else.
    The head keeps its head resource (there since before other nodes had gateways); other
    nodes are named by the node-id label rather than their `node:<ip>` resource, which two
    nodes behind one address could share."""
    options: dict[str, Any] = {"num_cpus": 0}
    if node_id is None:
        options["resources"] = head_node_resources()
    else:
        options["label_selector"] = {NODE_ID_LABEL: node_id}
    return options


def parse_openai_request(method: Method, body: dict[str, Any]) -> Any:
    """vLLM's own request models (as re-exported by Ray Serve LLM): same validation as vLLM."""
    from ray.serve.llm.openai_api_models import ChatCompletionRequest, CompletionRequest

    model = ChatCompletionRequest if method == "chat" else CompletionRequest
    try:
        return model.model_validate(body)
    except ValueError:
        raise
    except Exception as exc:
        # vLLM's model validators raise VLLMValidationError (not a ValueError) and, fed a
        # wrong type, AttributeError or TypeError: all of them are about the client's body,
        # so the gateway must answer 400, not 500.
        raise ValueError(f"{type(exc).__name__}: {exc}") from exc


class RegistryClient:
    """The gateway's side of the fleet registry actor (handle looked up once, lazily)."""

    def __init__(self) -> None:
        self._handle: Any = None

    def _registry(self) -> Any:
        if self._handle is None:
            from serve_apps.registry.registry_actor import registry_actor

            self._handle = registry_actor(create=False)
        return self._handle

    async def fetch(self, known: RoutingTable, timeout_s: float) -> RoutingTable | None:
        table: RoutingTable | None = await self._registry().wait_for_change.remote(
            known.version, timeout_s, known.epoch
        )
        return table

    async def report(
        self, replica: str, version: int, counts: dict[str, int], started: dict[str, int]
    ) -> None:
        await self._registry().report_in_flight.remote(replica, version, counts, started)

    async def fetch_tenants(self, known_version: int) -> TenantTable | None:
        table: TenantTable | None = await self._registry().tenants.remote(known_version)
        return table

    async def exchange_usage(self, replica: str, delta: UsageDelta) -> RemoteUsage:
        remote: RemoteUsage = await self._registry().exchange_usage.remote(replica, delta)
        return remote

    async def engine_endpoints(self) -> list[EngineEndpoint]:
        endpoints: list[EngineEndpoint] = await self._registry().engine_endpoints.remote()
        return endpoints

    async def request_wake(self, name: str) -> None:
        await self._registry().request_wake.remote(name)

    async def operator_document(self, which: OperatorDocument) -> dict[str, Any] | None:
        """The registry's status (`status`) or fleet (`fleet`) document."""
        registry = self._registry()
        call = registry.status_document if which == "status" else registry.fleet_document
        document: dict[str, Any] | None = await asyncio.wait_for(call.remote(), 10.0)
        return document


class ServeReplicaCounts:
    """Running replicas per Serve application, asked of Serve's controller.

    `serve.status()` would do, but it builds the whole instance description (every
    deployment's config, vLLM's included) and parses it into pydantic models: at one poll a
    second that was about a third of a busy gateway's CPU (BENCHMARKS.md). The controller's
    running-replica table is the same fact in a few small records. It is a private method
    of Serve's controller, so a Ray without it falls back to `serve.status()`.
    """

    def __init__(
        self,
        controller: Any = None,
        fallback: Callable[[], Awaitable[Mapping[str, int]]] | None = None,
    ) -> None:
        self._controller = controller  # looked up on first use when not given
        self._fallback = fallback or running_replicas_from_status
        self._table_available = True

    async def __call__(self) -> Mapping[str, int]:
        if self._table_available:
            try:
                return await self._from_running_table()
            except AttributeError:
                log.warning("Serve's controller has no running-replica table; using serve.status()")
                self._table_available = False
        return await self._fallback()

    async def _from_running_table(self) -> Mapping[str, int]:
        if self._controller is None:
            self._controller = serve_controller()
        return await running_replicas_by_app(self._controller)


async def running_replicas_from_status() -> Mapping[str, int]:
    from ray import serve

    status = await asyncio.to_thread(serve.status)
    return {
        app_name: sum(running_replicas_in(d) for d in app_status.deployments.values())
        for app_name, app_status in status.applications.items()
    }


@contextlib.contextmanager
def tls_files(settings: GatewaySettings) -> Iterator[tuple[str, str] | None]:
    """The settings' certificate and key as files readable by this process only, for as
    long as uvicorn takes to load them (it reads them once, at start), then removed: the
    key never stays on the node's disk."""
    if settings.tls_cert_pem is None or settings.tls_key_pem is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="switchyard-tls-") as directory:
        os.chmod(directory, 0o700)
        cert, key = Path(directory, "cert.pem"), Path(directory, "key.pem")
        cert.write_text(settings.tls_cert_pem)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(settings.tls_key_pem.get_secret_value())
        yield str(cert), str(key)


class GatewayReplica:
    """One gateway replica: composes a Gateway from its settings and serves it on the
    endpoint's host and port itself.

    Not behind Ray Serve's HTTP proxy: the proxy would add a Ray hop for every streamed
    chunk (proxy -> replica), which on small machines cost more CPU than the engine's own
    HTTP front end (BENCHMARKS.md). Replicas on one node share the port (SO_REUSEPORT).
    """

    # Serve awaits an async constructor: the replica counts as started once it listens.
    async def __init__(self, settings_json: str, host: str, port: int) -> None:  # type: ignore[misc]
        settings = GatewaySettings.model_validate_json(settings_json)
        # vLLM's request models import vLLM itself (seconds); do it while the replica starts,
        # not on the first request inside the event loop, where every early request waits.
        import ray.serve.llm.openai_api_models  # noqa: F401

        registry = RegistryClient()
        backend: ModelBackend = ServeHandleBackend(settings.retry_after_s)
        self._endpoints: EngineEndpointView | None = None
        self._direct: DirectHttpBackend | None = None
        if settings.direct_streaming:
            self._endpoints = EngineEndpointView(
                registry.engine_endpoints, period_s=settings.health_poll_s
            )
            backend = self._direct = DirectHttpBackend(self._endpoints, backend)
        self._gateway = Gateway(
            settings,
            RouteView(registry.fetch),
            ReplicaHealthView(
                ServeReplicaCounts(),
                period_s=settings.health_poll_s,
                confirm=running_replicas_from_status,
            ),
            backend,
            parse_openai_request,
            registry.report,
            # Created here, in the replica: Ray metrics belong to the process that records them.
            RayGatewayMetrics(settings.inter_token_sample_every),
            tenants=(registry.fetch_tenants, registry.exchange_usage),
            request_wake=registry.request_wake,
            operator_documents=registry,
        )

        self._gateway.start()
        if self._endpoints is not None:
            self._endpoints.start()
        with tls_files(settings) as files:
            self._listener = AsgiListener(
                self._gateway.app, host, port, share_port=True, tls_files=files
            )
            await self._listener.start()

    async def check_health(self) -> None:
        if not self._listener.serving:
            raise RuntimeError("the gateway's HTTP server stopped")

    async def __del__(self) -> None:
        await self._listener.stop()
        await self._gateway.stop()
        if self._endpoints is not None:
            await self._endpoints.stop()
        if self._direct is not None:
            await self._direct.close()  # its pooled connections to the engines


def build_gateway_app(
    settings: GatewaySettings, host: str, port: int, *, node_id: str | None = None
) -> Application:
    """One ingress node's gateway Serve application (the head's when `node_id` is None);
    its replicas listen on `host`:`port` themselves."""
    from ray import serve

    deployment = serve.deployment(
        name=GATEWAY_DEPLOYMENT_NAME,
        num_replicas=settings.replicas,
        max_ongoing_requests=10_000,
        ray_actor_options=gateway_actor_options(node_id),
    )(GatewayReplica)
    # SecretStr would serialize as '**********'; the replica needs the real keys, passed
    # as Ray task arguments (never logged by Switchyard).
    payload = settings.model_dump(mode="json")
    payload["api_keys"] = [k.get_secret_value() for k in settings.api_keys]
    if settings.tls_key_pem is not None:
        payload["tls_key_pem"] = settings.tls_key_pem.get_secret_value()
    import json

    return deployment.bind(json.dumps(payload), host, port)
