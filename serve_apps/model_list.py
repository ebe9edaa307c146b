"""`GET /v1/models`: the live models and their aliases, in OpenAI's list shape."""

from __future__ import annotations

from typing import Any

from serve_apps.routing_table import RoutingTable


def model_list(table: RoutingTable) -> dict[str, Any]:
    """Every live model (with its state, aliases and layout), then one entry per alias."""
    data: list[dict[str, Any]] = []
    for route in table.live_models():
        data.append(
            {
                "id": route.name,
                "object": "model",
                "created": 0,
                "owned_by": "switchyard",
                "state": route.state.value,
                "aliases": list(table.aliases_of(route.name)),
                "layout": route.layout,
            }
        )
    for alias, target in sorted(table.aliases.items()):
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


def model_entry(table: RoutingTable, requested: str) -> dict[str, Any] | None:
    """`GET /v1/models/{id}`: the entry `model_list` shows for a name or an alias (its `id`
    echoes what was asked, as OpenAI's API does), or None for anything else."""
    for entry in model_list(table)["data"]:
        if entry["id"] == requested:
            return dict(entry)
    return None
