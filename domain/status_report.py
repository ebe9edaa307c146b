"""What `switchyard status --json` prints: one documented, versioned document.

`schema_version` is the operation protocol's (domain/operation.py); later versions only add
keys. Assembled by `serve_apps/registry/status_document.py` from the registry's table and the
manager's view: by `switchyard status` over Ray, or by the registry for the gateway's status
route (`GET /switchyard/v1/status`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from domain.fleet_file import FleetModelEntry
from domain.operation import SCHEMA_VERSION, RunningOperation, SwapSummary


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelLive(_Document):
    """Current throughput and latency of one model (the live part of `metrics`)."""

    model: str
    generated_tok_s: float
    prompt_tok_s: float
    requests_s: float
    ttft_p95_s: float | None = None


class CapacitySide(_Document):
    """Per engine (one GPU of the limiting stage); null for what that side does not know."""

    weights_gib: float | None = None
    kv_cache_gib: float | None = None
    kv_cache_tokens: int | None = None
    cuda_graph_gib: float | None = None


class ModelCapacityStatus(_Document):
    predicted: CapacitySide
    observed: CapacitySide


class ModelStatus(_Document):
    """One model as clients and the fleet see it now."""

    name: str
    aliases: list[str]
    state: str
    """A ModelState value: loading, ready, draining, degraded, failed, parked, waking."""
    layout: str
    source: str
    replicas: int
    error: str | None = None
    """Why it is failed or degraded."""
    app: str | None = None
    """Its Serve application (`model-<name>-g<generation>`)."""
    generated_tok_s: float | None = None
    ttft_p95_s: float | None = None
    capacity: ModelCapacityStatus | None = None
    """What admission predicted for its deployment and what its engine logged at start-up;
    None until the manager has recorded a start of it."""
    residency: str | None = None
    """`always` or `on_demand` (None without a manager)."""
    park_mode: str | None = None
    """How it is parked: `unload` (None without a manager)."""
    last_wake_s: float | None = None
    """How long its latest wake from parked took, admission to warmed (None: never woken)."""


class MetricsStatus(_Document):
    prometheus_service_discovery_file: str
    """Where Ray lists every node's metrics agent for Prometheus to scrape."""
    source: str | None = None
    """Where the live figures came from: a Prometheus URL, `manager`, `ray-metrics-agents`,
    or None (no live figures)."""
    window_s: float | None = None
    """Seconds the figures are averaged over, where known."""
    models: list[ModelLive] = Field(default_factory=list)


class KeyUsage(_Document):
    """One tenant key over the last 60 s, every gateway replica together (by name only)."""

    name: str
    requests: int
    tokens: int
    """Prompt + generated tokens of its finished requests."""
    rejections: int


class TenantsStatus(_Document):
    source: str | None
    """Where the tenant table came from (a keys file, a fleet file, `--api-key`); None on
    an endpoint without keys."""
    keys: int
    """Tenants the endpoint accepts."""
    top: list[KeyUsage] = Field(default_factory=list)
    """The busiest keys of the last 60 s, most requests first (at most 10)."""


class EndpointStatus(_Document):
    """One ingress node's gateway: where clients reach the same models and aliases."""

    url: str
    """Its OpenAI base URL (ends in `/v1`)."""
    node: str
    """The start of its Ray node id."""
    node_ip: str
    head: bool
    app: str
    """Its gateway's Serve application."""
    alive: bool
    """Whether Ray sees its node alive now."""
    running_replicas: int | None = None
    """Its gateway replicas Serve runs now (None where Serve could not be asked)."""


class HeadStatus(_Document):
    """The head's fault tolerance, from the state directory's record (answers with the GCS
    away): `up --gcs-store` makes a local head fault-tolerant."""

    fault_tolerant: bool
    gcs_store: str | None = None
    """Where the GCS keeps its tables (no password)."""
    reconnect_timeout_s: int | None = None
    """How long raylets wait for a GCS that went away (`RAY_gcs_rpc_server_reconnect_timeout_s`)."""
    supervisor_running: bool = False
    outages: int = 0
    """Head processes that died and were started again since `up`."""
    recovering: list[str] = Field(default_factory=list)
    """Head processes down right now, being started again."""
    last_recovered_at: float | None = None
    """Unix time of the last recovery."""


class ModelResidencyStatus(_Document):
    """When a model holds its accelerators (its residency keys) and its latest wake."""

    residency: str
    park_mode: str
    last_wake_s: float | None = None


class ManagerStatus(_Document):
    """The fleet manager's part of the status document.

    `status` over Ray asks the manager for it (inventory probed then); the manager also
    publishes it to the registry every few seconds, in memory only, and the gateway's
    status route (`GET /switchyard/v1/status`) answers from that copy without a Ray driver.
    """

    address: str
    """The Ray cluster's address, as the manager sees it."""
    published_at: float
    """Unix time this view was taken."""
    inventory: dict[str, Any] | None = None
    """Every node's hardware as admission sees it (cluster/inventory's JSON document)."""
    inventory_at: float | None = None
    """Unix time of that probe: a published view re-probes only after a change or a while."""
    operation: RunningOperation | None = None
    live_metrics: MetricsStatus | None = None
    last_swap: SwapSummary | None = None
    capacity: dict[str, ModelCapacityStatus] = Field(default_factory=dict)
    residency: dict[str, ModelResidencyStatus] = Field(default_factory=dict)
    alive_nodes: list[str] = Field(default_factory=list)
    """Ray node ids alive when the view was taken (for the ingress endpoints' `alive`)."""
    running_replicas: dict[str, int] | None = None
    """Running replicas per Serve application; None where Serve could not be asked."""
    fleet: list[FleetModelEntry] = Field(default_factory=list)
    """Each live model's entry as it was asked for (not in the status document: the
    gateway's `GET /switchyard/v1/fleet` serves it, for `export` and `diff`)."""
    fleet_aliases: dict[str, str] = Field(default_factory=dict)
    """The fleet's aliases (alias -> model) as the manager keeps them."""


class StatusReport(_Document):
    schema_version: int = SCHEMA_VERSION
    address: str
    """The Ray cluster's address."""
    endpoint: str | None
    """The head's endpoint (`endpoints` lists every ingress node's)."""
    dashboard_url: str | None
    routing_table_version: int
    models: list[ModelStatus]
    aliases: dict[str, str]
    metrics: MetricsStatus
    inventory: dict[str, Any] | None
    """Every node's hardware as admission sees it (probed, then overridden); None when no
    manager runs."""
    operation: RunningOperation | None = None
    """The change the manager is making right now, if any."""
    tenants: TenantsStatus | None = None
    """The tenant keys and their top users; None when the stack has no keys file."""
    endpoints: list[EndpointStatus] = Field(default_factory=list)
    """Every ingress node's gateway, the head's first; empty on a stack started before
    ingress nodes were recorded."""
    last_swap: SwapSummary | None = None
    """The latest swap since the manager started: its strategy, phases and how long each
    alias it moved had no model serving it."""
    head: HeadStatus | None = None
    """The local head `up` started here (None for a joined cluster's)."""
    read_via: str = "ray"
    """How `status` got the document: `gateway` (the endpoint's `/switchyard/v1/status`
    route, no Ray driver) or `ray` (the registry and manager actors, asked directly)."""
    manager_status_age_s: float | None = None
    """Seconds since the manager took the view this document shows (0 over Ray, a few
    seconds through the gateway; None without a manager)."""
