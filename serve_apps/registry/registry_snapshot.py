"""What the fleet registry keeps in durable state, and the store it keeps it in.

A registry that restarts (its process was killed, say by the OOM killer) must come back
with the table it had: an empty one would answer 404 for every model while the engines keep
running (ray#62728 is the same pattern in Serve's controller). So every change to the
routing table, the facts `up` sets or the tenant table is written before it is published,
and engine endpoints soon after they appear or go. A usage window of the last minute and
the gateways' in-flight reports are not kept: gateways send both again within a second.

The snapshot is pickled: it is written and read by the same Switchyard on the same cluster
(`down` deletes it), and a blob this code cannot read is treated as no snapshot, which the
manager repairs by rebuilding the table from its journal.
"""

from __future__ import annotations

import logging
import pickle
from dataclasses import dataclass, field
from typing import Any, Protocol

from domain.tenant_keys import TenantTable
from serve_apps.registry.engine_endpoint import EngineEndpoint
from serve_apps.registry.routing_table import RoutingTable

log = logging.getLogger(__name__)

SNAPSHOT_KEY = "registry-snapshot"
_FORMAT = 2


@dataclass(frozen=True)
class RegistrySnapshot:
    table: RoutingTable
    table_open: bool = True
    """False while the manager rebuilds a table the registry lost (FleetRegistry.open_table)."""
    facts: dict[str, Any] = field(default_factory=dict)
    tenants: TenantTable | None = None
    engine_endpoints: tuple[EngineEndpoint, ...] = ()

    def encode(self) -> bytes:
        return pickle.dumps((_FORMAT, self), protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def decode(blob: bytes) -> RegistrySnapshot | None:
        """The snapshot in `blob`; None (logged) when this code cannot read it."""
        try:
            version, snapshot = pickle.loads(blob)
        except Exception as exc:
            log.error("the registry's saved state cannot be read (%r); starting without it", exc)
            return None
        if version != _FORMAT or not isinstance(snapshot, RegistrySnapshot):
            log.error("the registry's saved state has format %r; starting without it", version)
            return None
        return snapshot


class RegistryStore(Protocol):
    """Durable bytes under a key: the GCS's key-value store on Ray (`GcsKeyValue` in
    serve_apps/internals.py), a dict in tests."""

    def get(self, key: str) -> bytes | None: ...

    def put(self, key: str, value: bytes) -> None: ...

    def delete(self, key: str) -> None: ...
