"""Composition root of a running Switchyard stack (`switchyard up/down/status`).

The one place that puts a stack together, in order: the Ray cluster (`cluster/startup/`),
Serve and the gateways, the registry's facts and the fleet manager (through their clients,
`cluster/clients/`), then the initial models. Every piece is a plain class or function that
knows nothing of the others' setup; nothing here touches Ray directly.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cluster.atomic_file import atomic_write_text
from cluster.fleet.journal import check_state_format
from cluster.fleet.manager_settings import MANAGER_DIR
from cluster.fleet.ports import DeployFailed
from cluster.startup.ray_runtime import RayConnection, connect, start_local_head
from domain.exit_codes import UserInputError
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
    admin_key_env: str | None = None
    """The environment variable holding the operator key (`up --admin-key-env`), if any."""
    tls_cert: str | None = None
    """The endpoint's certificate file (`up --tls-cert`), for local clients to trust."""

    def to_json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "endpoint": self.endpoint,
            "dashboard_url": self.dashboard_url,
            "started_local_head": self.started_local_head,
            "admin_key_env": self.admin_key_env,
            "tls_cert": self.tls_cert,
        }


def read_stack_info(state_dir: Path) -> StackInfo | None:
    path = state_dir / STACK_FILE
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return StackInfo(**data)


NO_INGRESS_BUT_THE_HEAD = (
    "--gcs-store: a fault-tolerant head serves no traffic, and no other node is an ingress "
    "node (the inventory overrides say `ingress: false` to the data node); let a node other "
    "than the head be ingress, or drop --gcs-store"
)


class Stack:
    def __init__(self, config: StackConfig, report: Report) -> None:
        self._config = config
        self._report = report
        self.address: str | None = None
        """The cluster `up` connected to, once it has."""
        self.started_head = False
        """This `up` started the local head (not one an earlier `up` left running)."""

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
        if self._fault_tolerant() and not self._data_node_would_serve():
            raise UserInputError(NO_INGRESS_BUT_THE_HEAD)  # before anything starts
        # Before the first `import ray`: Ray reads RAY_AUTH_MODE once, at import time.
        connection = self._connection()
        self.started_head = connection.started_local_head and not connection.reused
        connect(connection.address)
        self.address = connection.address
        if config.accelerator_from_cluster:
            from cluster.startup.ray_runtime import cluster_gpus

            gpus = cluster_gpus()
            kind: Literal["gpu", "cpu"] = "gpu" if gpus else "cpu"
            self._report(f"--accelerator auto: the cluster's nodes declare {gpus} GPUs: {kind}")
            config = self._config = config.with_accelerator(kind)

        from cluster.clients.manager_client import RayManagerClient
        from cluster.clients.registry_client import RayRegistryClient
        from cluster.fleet.manager_settings import ManagerSettings
        from cluster.startup.serving_stack import deploy_gateways, start_serve
        from domain.deployment_config import AcceleratorConfig
        from domain.operation_request import AddRequest
        from serve_apps.registry.status_document import ADDRESS_FACT, ENDPOINTS_FACT

        ingress = self._ingress()
        info = StackInfo(
            address=connection.address,
            endpoint=config.endpoint,
            dashboard_url=connection.dashboard_url,
            started_local_head=connection.started_local_head,
            admin_key_env=config.admin_key_env,
            tls_cert=None if config.tls_cert_file is None else str(config.tls_cert_file.resolve()),
        )
        atomic_write_text(config.state_dir / STACK_FILE, json.dumps(info.to_json(), indent=2))
        start_serve()
        registry = RayRegistryClient.create()
        registry.set_fact("endpoint", info.endpoint)
        registry.set_fact("dashboard_url", info.dashboard_url)
        registry.set_fact(ADDRESS_FACT, info.address)
        # Before any engine starts: engine replicas read it to choose their direct address.
        registry.set_fact(ENDPOINTS_FACT, [n.to_json() for n in ingress])
        tenants = config.gateway.tenants
        if tenants.tenants:
            # The registry's copy is what `status` reads and a later reload replaces; the
            # gateway replicas start with the same table in their settings.
            registry.set_tenants(tenants)
            if config.keys_file is not None:
                registry.set_fact(KEYS_FILE_FACT, str(config.keys_file.resolve()))
        deploy_gateways(config.gateway, ingress, config.port, self._report)
        manager = RayManagerClient.create(
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
        fleet = manager.fleet()
        results = []
        for model in config.models:
            if model.name in fleet.models:
                self._report(f"{model.name} is already part of the fleet")
                continue
            self._report(f"deploying {model.name} ({model.source}, {model.layout}) ...")
            outcome = manager.run(AddRequest(config=model))
            if outcome is None:
                raise DeployFailed(
                    f"the manager died while deploying {model.name}; it reconciles the fleet "
                    "when it restarts"
                )
            if not outcome.succeeded:
                raise DeployFailed(outcome.message)
            self._report(outcome.message)
            results.append(outcome)
        return info, results

    def _fault_tolerant(self) -> bool:
        return self._config.address is None and self._config.local_head.gcs_store is not None

    def _data_node_would_serve(self) -> bool:
        """Whether the overrides leave the data node `up` would start its ingress role, as
        far as they can be judged before it exists (not by its node id or Ray's address for
        it; the check on the running cluster catches those)."""
        import socket

        from cluster.inventory.node_roles import INGRESS_ROLE, ROLE_LABEL, NodeIdentity, is_ingress

        config = self._config
        data_node = NodeIdentity(
            node_id="",
            node_ip=config.local_head.node_ip_address,
            labels=((ROLE_LABEL, INGRESS_ROLE),),
            hostname=socket.gethostname(),
        )
        return is_ingress(data_node, config.inventory.overrides)

    def _ingress(self) -> tuple[IngressNode, ...]:
        """The ingress nodes, refused when one would serve beyond loopback without a key
        (the head's own host is checked with the config)."""
        # Here, not at module level: it brings the gateway's modules, which `status` and
        # `down` (importing this module) do not need.
        from cluster.startup.serving_stack import cluster_ingress_nodes

        config = self._config
        # A fault-tolerant head keeps traffic off itself (cluster/startup/data_node.py).
        fault_tolerant = self._fault_tolerant()
        nodes = cluster_ingress_nodes(
            config.inventory.overrides,
            head_host=config.host,
            port=config.port,
            scheme="https" if config.gateway.tls else "http",
            head_serves=not fault_tolerant,
        )
        if not nodes:
            raise UserInputError(NO_INGRESS_BUT_THE_HEAD)
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
