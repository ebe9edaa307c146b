"""The `status --json` document, assembled from the registry's state and the manager's view.

One function for both ways `status` reads a stack: over Ray (`switchyard status` asks the
registry and manager actors) and through the gateway (`GET /switchyard/v1/status`, which the
registry answers from the view the manager last published). Pure: records in, document out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from domain.metric_names import RAY_SD_FILE
from domain.status_report import (
    EndpointStatus,
    KeyUsage,
    ManagerStatus,
    MetricsStatus,
    ModelStatus,
    StatusReport,
    TenantsStatus,
)
from domain.tenant_keys import TenantTable
from serve_apps.registry.routing_table import RoutingTable

ENDPOINTS_FACT = "endpoints"
"""The ingress nodes `up` deployed a gateway on: a list of `IngressNode.to_json()`
(`cluster/startup/ingress_nodes.py`). `status` lists them; engine replicas bind their direct port
where those gateways can reach it."""
ADDRESS_FACT = "address"
"""The Ray cluster's address, as `up` recorded it."""


def endpoint_statuses(
    recorded: Iterable[Any], alive: set[str], running: Mapping[str, int] | None
) -> list[EndpointStatus]:
    """The recorded ingress endpoints (`ENDPOINTS_FACT`) with their node's liveness and their
    gateway app's running replicas (None: unknown)."""
    endpoints = []
    for entry in recorded:
        if not isinstance(entry, dict):
            continue
        node_id = str(entry.get("node_id", ""))
        app = str(entry.get("app", ""))
        endpoints.append(
            EndpointStatus(
                url=f"{entry.get('url')}/v1",
                node=str(entry.get("node", node_id[:12])),
                node_ip=str(entry.get("node_ip", "")),
                head=bool(entry.get("head")),
                app=app,
                # The head's entry may have no id (a stack without a Ray node table).
                alive=node_id in alive or (bool(entry.get("head")) and not node_id),
                running_replicas=None if running is None else running.get(app, 0),
            )
        )
    return endpoints


def recorded_endpoints(facts: Mapping[str, Any]) -> list[Any]:
    recorded = facts.get(ENDPOINTS_FACT)
    return recorded if isinstance(recorded, list) else []


def status_report(
    *,
    address: str | None,
    table: RoutingTable,
    facts: Mapping[str, Any],
    tenants: TenantTable | None,
    tenant_usage: list[dict[str, Any]],
    manager: ManagerStatus | None,
    endpoints: list[EndpointStatus],
    now: float,
) -> StatusReport:
    """The status document: models, aliases and facts from the registry; inventory,
    operation, live figures, capacity and residency from the manager's view (None: no
    manager runs, or it has not published yet)."""
    by_model = table.aliases_by_model()
    models = []
    for route in table.live_models():
        model = ModelStatus(
            name=route.name,
            aliases=list(by_model.get(route.name, ())),
            state=route.state.value,
            layout=route.layout,
            source=route.source,
            replicas=route.replicas,
            error=route.error,
            app=route.app_name,
        )
        if manager is not None:
            residency = manager.residency.get(route.name)
            if residency is not None:
                model.residency = residency.residency
                model.park_mode = residency.park_mode
                model.last_wake_s = residency.last_wake_s
            model.capacity = manager.capacity.get(route.name)
        models.append(model)
    return StatusReport(
        endpoints=endpoints,
        address=str(facts.get(ADDRESS_FACT) or (manager.address if manager else address) or ""),
        endpoint=facts.get("endpoint"),
        dashboard_url=facts.get("dashboard_url"),
        routing_table_version=table.version,
        models=models,
        aliases=dict(table.aliases),
        metrics=(manager.live_metrics if manager else None)
        or MetricsStatus(prometheus_service_discovery_file=RAY_SD_FILE),
        inventory=manager.inventory if manager else None,
        operation=manager.operation if manager else None,
        last_swap=manager.last_swap if manager else None,
        tenants=None
        if tenants is None
        else TenantsStatus(
            source=tenants.source or None,
            keys=len(tenants.tenants),
            top=[KeyUsage.model_validate(u) for u in tenant_usage],
        ),
        manager_status_age_s=None if manager is None else max(0.0, now - manager.published_at),
    )
