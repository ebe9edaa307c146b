"""The fleet registry, as the CLI talks to it: typed calls on the registry actor.

`RegistryApi` is what commands are written against; `RayRegistryClient` is it on the
registry actor (`serve_apps/registry/registry_actor.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cluster.clients.actor_calls import answer
from domain.exit_codes import UserInputError
from domain.status_report import EndpointStatus
from domain.tenant_keys import TenantTable
from serve_apps.registry.engine_endpoint import EngineEndpoint
from serve_apps.registry.routing_table import RoutingTable
from serve_apps.registry.status_document import endpoint_statuses, recorded_endpoints


@dataclass(frozen=True)
class RegistryView:
    """What `status` shows of the registry, read in one round trip."""

    table: RoutingTable
    facts: dict[str, Any]
    """What `up` recorded: the endpoint, the dashboard, the ingress endpoints, the keys file."""
    tenants: TenantTable | None
    """The published tenant table; None when the endpoint has no keys."""
    tenant_usage: list[dict[str, Any]]
    """The top tenants over the last 60 s."""


class RegistryApi(Protocol):
    def view(self) -> RegistryView: ...

    def facts(self) -> dict[str, Any]: ...

    def set_fact(self, key: str, value: Any) -> None: ...

    def set_tenants(self, table: TenantTable) -> int:
        """Publish `table` to every gateway replica; the version the registry now holds (a
        newer one than `table.version` means another publish won)."""
        ...

    def ingress_endpoints(self, facts: Mapping[str, Any]) -> list[EndpointStatus]:
        """Every ingress node's gateway `up` recorded in `facts` (the registry's), with
        whether its node is alive and how many of its gateway replicas run now."""
        ...

    def engine_endpoints(self) -> list[EngineEndpoint]:
        """Where each engine replica answers HTTP directly (the gateway's fast data path)."""
        ...


REGISTRY = "fleet registry"


class RayRegistryClient:
    """`RegistryApi` on the registry actor; every call has a deadline (actor_calls.py)."""

    def __init__(self, actor: Any) -> None:
        self._actor = actor

    @classmethod
    def connect(cls, address: str) -> RayRegistryClient:
        """Join the cluster at `address` and find its registry; UserInputError when no
        Switchyard stack runs there."""
        from cluster.startup.ray_runtime import connect
        from serve_apps.registry.registry_actor import registry_actor

        connect(address)
        try:
            return cls(registry_actor(create=False))
        except ValueError:
            raise UserInputError(
                f"no Switchyard stack runs on {address} (no registry actor)"
            ) from None

    @classmethod
    def create(cls) -> RayRegistryClient:
        """The registry of the cluster this process has joined, created on the head node if
        it does not run."""
        from serve_apps.registry.registry_actor import registry_actor

        return cls(registry_actor())

    def view(self) -> RegistryView:
        calls = [
            self._actor.table.remote(),
            self._actor.facts.remote(),
            self._actor.tenants.remote(-1),
            self._actor.tenant_usage.remote(),
        ]
        table, facts, tenants, usage = answer(calls, REGISTRY, "with its view")
        return RegistryView(table, facts, tenants, usage)

    def facts(self) -> dict[str, Any]:
        facts: dict[str, Any] = answer(self._actor.facts.remote(), REGISTRY, "with its facts")
        return facts

    def set_fact(self, key: str, value: Any) -> None:
        answer(self._actor.set_fact.remote(key, value), REGISTRY, f"to setting {key}")

    def set_tenants(self, table: TenantTable) -> int:
        version: int = answer(
            self._actor.set_tenants.remote(table), REGISTRY, "to publishing the tenant table"
        )
        return version

    def engine_endpoints(self) -> list[EngineEndpoint]:
        endpoints: list[EngineEndpoint] = answer(
            self._actor.engine_endpoints.remote(), REGISTRY, "with the engines' endpoints"
        )
        return endpoints

    def ingress_endpoints(self, facts: Mapping[str, Any]) -> list[EndpointStatus]:
        from cluster.ray_adapters.ingress_liveness import alive_node_ids, running_replicas_or_none

        recorded = recorded_endpoints(facts)
        if not recorded:
            return []
        return endpoint_statuses(recorded, alive_node_ids(), running_replicas_or_none())
