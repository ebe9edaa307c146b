"""`GET /v1/models`: the live models and their aliases, in OpenAI's list shape."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from serve_apps.registry.routing_table import RoutingTable

MayUse = Callable[[str, str], bool]
"""(id asked for, model it resolves to) -> may the caller use it (`Tenant.may_use`)."""


def _everything(requested: str, resolved: str) -> bool:
    return True


def model_list(table: RoutingTable, may_use: MayUse = _everything) -> dict[str, Any]:
    """Every live model (with its state, aliases and layout), then one entry per alias;
    only those `may_use` allows (a tenant key sees what it may call, nothing else)."""
    data: list[dict[str, Any]] = []
    by_model = table.aliases_by_model()
    for route in table.live_models():
        if not may_use(route.name, route.name):
            continue
        data.append(
            {
                "id": route.name,
                "object": "model",
                "created": 0,
                "owned_by": "switchyard",
                "state": route.state.value,
                "aliases": [a for a in by_model.get(route.name, ()) if may_use(a, route.name)],
                "layout": route.layout,
            }
        )
    for alias, target in sorted(table.aliases.items()):
        if not may_use(alias, target):
            continue
        data.append(
            {
                "id": alias,
                "object": "model",
                "created": 0,
                "owned_by": "switchyard",
                "alias_for": target,
            }
        )
    return {"object": "list", "data": data}


def model_entry(
    table: RoutingTable, requested: str, may_use: MayUse = _everything
) -> dict[str, Any] | None:
    """`GET /v1/models/{id}`: the entry `model_list` shows for a name or an alias (its `id`
    echoes what was asked, as OpenAI's API does), or None for anything else."""
    for entry in model_list(table, may_use)["data"]:
        if entry["id"] == requested:
            return dict(entry)
    return None
