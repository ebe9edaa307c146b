"""Ray Serve wiring for the gateway: the only place it is decorated or bound."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from serve_apps.gateway import Gateway
from serve_apps.gateway_metrics import RayGatewayMetrics
from serve_apps.gateway_settings import GatewaySettings
from serve_apps.model_backend import Method, ServeHandleBackend
from serve_apps.replica_health import ReplicaHealthView
from serve_apps.route_view import RouteView
from serve_apps.routing_table import RoutingTable

if TYPE_CHECKING:
    from ray.serve.deployment import Application

GATEWAY_APP_NAME = "switchyard-gateway"
GATEWAY_DEPLOYMENT_NAME = "gateway"


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
        # so the gateway must answer 400, not 500 (found by tests/unit/serving fuzzing).
        raise ValueError(f"{type(exc).__name__}: {exc}") from exc


class RegistryClient:
    """The gateway's side of the fleet registry actor (handle looked up once, lazily)."""

    def __init__(self) -> None:
        self._handle: Any = None

    def _registry(self) -> Any:
        if self._handle is None:
            from cluster.registry import registry_actor

            self._handle = registry_actor(create=False)
        return self._handle

    async def fetch(self, known_version: int, timeout_s: float) -> RoutingTable:
        table: RoutingTable = await self._registry().wait_for_change.remote(
            known_version, timeout_s
        )
        return table

    async def report(self, replica: str, version: int, counts: dict[str, int]) -> None:
        await self._registry().report_in_flight.remote(replica, version, counts)


async def _running_replicas() -> Mapping[str, int]:
    from ray import serve
    from ray.serve._private.common import ReplicaState

    status = await asyncio.to_thread(serve.status)
    running: dict[str, int] = {}
    for app_name, app_status in status.applications.items():
        running[app_name] = sum(
            d.replica_states.get(ReplicaState.RUNNING, 0) for d in app_status.deployments.values()
        )
    return running


class GatewayReplica:
    """One gateway replica: composes a Gateway from its settings."""

    def __init__(self, settings_json: str) -> None:
        settings = GatewaySettings.model_validate_json(settings_json)
        # vLLM's request models import vLLM itself (seconds); do it while the replica starts,
        # not on the first request inside the event loop, where every early request waits.
        import ray.serve.llm.openai_api_models  # noqa: F401

        registry = RegistryClient()
        self._gateway = Gateway(
            settings,
            RouteView(registry.fetch),
            ReplicaHealthView(_running_replicas, period_s=settings.health_poll_s),
            ServeHandleBackend(),
            parse_openai_request,
            registry.report,
            # Created here, in the replica: Ray metrics belong to the process that records them.
            RayGatewayMetrics(),
        )

    async def __serve_build_asgi_app__(self) -> Any:
        self._gateway.start()
        return self._gateway.app

    async def check_health(self) -> None:
        return None


def build_gateway_app(settings: GatewaySettings) -> Application:
    from ray import serve

    deployment = serve.deployment(
        name=GATEWAY_DEPLOYMENT_NAME,
        num_replicas=settings.replicas,
        # The gateway only awaits I/O; a high bound keeps Serve from queueing in front of it.
        max_ongoing_requests=10_000,
        ray_actor_options={"num_cpus": 0},
    )(serve.ingress()(GatewayReplica))
    # SecretStr would serialize as '**********'; the replica needs the real keys, passed
    # as Ray task arguments (never logged by Switchyard).
    payload = settings.model_dump(mode="json")
    payload["api_keys"] = [k.get_secret_value() for k in settings.api_keys]
    import json

    return deployment.bind(json.dumps(payload))
