"""Composition root of a running Switchyard stack (`switchyard up/down/status`).

The one place that wires Ray, Serve, the registry, the gateway, staging and the deployer
together; everything it wires is a plain class that knows nothing of the others' setup.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cluster.atomic_file import atomic_write_text
from cluster.fleet.journal import check_state_format
from cluster.fleet.manager_settings import MANAGER_DIR
from cluster.fleet.ports import DeployFailed
from cluster.startup.ray_runtime import RayConnection, connect, start_local_head
from domain.exit_codes import UserInputError
from domain.fleet_state import FleetState
from domain.operation import OperationResult
from domain.tenant_keys import KEYS_FILE_FACT
from switchyard.stack_config import StackConfig, is_loopback
from switchyard.teardown import STACK_FILE

if TYPE_CHECKING:
    from cluster.startup.ingress_nodes import IngressNode

Report = Callable[[str], None]


@dataclass(frozen=True)
class StackInfo:
    address: str
    endpoint: str
    dashboard_url: str | None
    started_local_head: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "endpoint": self.endpoint,
            "dashboard_url": self.dashboard_url,
            "started_local_head": self.started_local_head,
        }


def read_stack_info(state_dir: Path) -> StackInfo | None:
    path = state_dir / STACK_FILE
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return StackInfo(**data)


class Stack:
    def __init__(self, config: StackConfig, report: Report) -> None:
        self._config = config
        self._report = report
        self.address: str | None = None
        """The cluster `up` connected to, once it has."""

    def _connection(self) -> RayConnection:
        if self._config.address:
            return RayConnection(self._config.address, started_local_head=False, dashboard_url=None)
        self._report("starting a local Ray head ...")
        return start_local_head(self._config.local_head, self._config.state_dir)

    def up(self) -> tuple[StackInfo, list[OperationResult]]:
        config = self._config
        # A state directory of another format is refused here, in one line, before the
        # manager actor would fail on it.
        check_state_format(config.state_dir / MANAGER_DIR)
        # Before the first `import ray`: Ray reads RAY_AUTH_MODE once, at import time.
        connection = self._connection()
        connect(connection.address)
        self.address = connection.address

        import ray
        from ray import serve

        from cluster.fleet.manager_settings import ManagerSettings
        from cluster.ray_adapters.manager_actor import manager_actor
        from domain.deployment_config import AcceleratorConfig
        from domain.operation_request import AddRequest
        from serve_apps.registry.registry_actor import ENDPOINTS_FACT, registry_actor

        ingress = self._ingress(ray.nodes())  # type: ignore[no-untyped-call]
        info = StackInfo(
            address=connection.address,
            endpoint=config.endpoint,
            dashboard_url=connection.dashboard_url,
            started_local_head=connection.started_local_head,
        )
        atomic_write_text(config.state_dir / STACK_FILE, json.dumps(info.to_json(), indent=2))
        # No Serve HTTP proxy: the gateway replicas listen on the endpoint themselves
        # (serve_apps/gateway/serve_deployment.py); every other Serve call goes through handles.
        serve.start(proxy_location="Disabled")
        registry = registry_actor()
        registry.set_fact.remote("endpoint", info.endpoint)
        registry.set_fact.remote("dashboard_url", info.dashboard_url)
        # Before any engine starts: engine replicas read it to choose their direct address.
        registry.set_fact.remote(ENDPOINTS_FACT, [n.to_json() for n in ingress])
        tenants = config.gateway.tenants
        if tenants.tenants:
            # The registry's copy is what `status` reads and a later reload replaces; the
            # gateway replicas start with the same table in their settings.
            registry.set_tenants.remote(tenants)
            if config.keys_file is not None:
                registry.set_fact.remote(KEYS_FILE_FACT, str(config.keys_file.resolve()))
        self._deploy_gateways(ingress)
        manager = manager_actor(
            ManagerSettings(
                state_dir=config.state_dir,
                accelerator=config.models[0].accelerator
                if config.models
                else AcceleratorConfig(kind=config.accelerator),
                deploy_timeout_s=config.deploy_timeout_s,
                inventory=config.inventory,
                fake_engines=config.fake_engines,
                hold_timeout_s=config.gateway.hold_timeout_s,
            )
        )
        fleet: FleetState = ray.get(manager.fleet.remote())
        results = []
        for model in config.models:
            if model.name in fleet.models:
                self._report(f"{model.name} is already part of the fleet")
                continue
            self._report(f"deploying {model.name} ({model.source}, {model.layout}) ...")
            outcome: OperationResult = ray.get(manager.run.remote(AddRequest(config=model)))
            if not outcome.succeeded:
                raise DeployFailed(outcome.message)
            self._report(outcome.message)
            results.append(outcome)
        return info, results

    def _ingress(self, entries: list[dict[str, Any]]) -> tuple[IngressNode, ...]:
        """The ingress nodes, refused when one would serve beyond loopback without a key
        (the head's own host is checked with the config)."""
        # Here, not at module level: it brings the gateway's modules, which `status` and
        # `down` (importing this module) do not need.
        from cluster.startup.ingress_nodes import ingress_nodes

        config = self._config
        nodes = ingress_nodes(
            entries,
            config.inventory.overrides,
            head_host=config.host,
            port=config.port,
            scheme="https" if config.gateway.tls else "http",
        )
        if nodes[0].fallback:
            self._report(
                "no node is an ingress node with an address (the inventory overrides say "
                "`ingress: false` to every one, or Ray lists none); the head serves the endpoint"
            )
        exposed = [n.url for n in nodes if not n.is_head and not is_loopback(n.host)]
        if exposed and not config.gateway.has_keys:
            raise UserInputError(
                f"ingress nodes would serve {', '.join(exposed)} without an API key; pass "
                "--api-key (or SWITCHYARD_API_KEY) or `--keys`, or take their ingress role"
            )
        return nodes

    def _deploy_gateways(self, ingress: tuple[IngressNode, ...]) -> None:
        """One gateway app per ingress node, then the apps of nodes no longer ingress gone
        (an earlier `up` with other roles)."""
        from ray import serve
        from ray.serve.api import RunTarget

        from serve_apps.gateway.serve_deployment import build_gateway_app, is_gateway_app

        config = self._config
        for node in ingress:
            where = "the head" if node.is_head else f"node {node.node_id[:12]}"
            self._report(f"deploying the gateway on {node.url} ({where}) ...")
        serve.run_many(
            [
                RunTarget(
                    target=build_gateway_app(
                        config.gateway,
                        node.host,
                        config.port,
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
                self._report(f"removing {name}: its node is no longer an ingress node")
                serve.delete(name)
