"""`RoutePort` on the fleet registry actor (serve_apps/registry/registry_actor.py), called
synchronously from the manager's threads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cluster.fleet.ports import RoutesUnavailable
from domain.model_state import ModelState
from serve_apps.registry.routing_table import ModelRoute, RoutingTable

REGISTRY_ANSWER_S = 120.0
"""How long the manager waits for one answer of the registry: longer than a whole-head
restart takes (the registry runs on the head and comes back with it), short enough that an
operation never waits forever on a registry that cannot be placed."""


class RegistryRoutes:
    def __init__(self, registry: Any) -> None:
        self._registry = registry

    def _call(self, method: str, *args: Any) -> Any:
        import ray
        from ray.exceptions import GetTimeoutError

        try:
            return ray.get(getattr(self._registry, method).remote(*args), timeout=REGISTRY_ANSWER_S)
        except GetTimeoutError:
            raise RoutesUnavailable(
                f"the fleet registry did not answer `{method}` within {REGISTRY_ANSWER_S:.0f} s"
            ) from None

    def routing_table(self) -> RoutingTable:
        table: RoutingTable = self._call("table")
        return table

    def is_open(self) -> bool:
        is_open: bool = self._call("is_open")
        return is_open

    def open_table(self) -> None:
        self._call("open_table")

    def put_route(self, route: ModelRoute) -> None:
        self._call("put_model", route)

    def set_route_state(self, name: str, state: ModelState, error: str | None = None) -> None:
        self._call("set_state", name, state, error)

    def remove_route(self, name: str, replaced_by: str | None = None) -> None:
        self._call("remove_model", name, replaced_by)

    def set_aliases(self, aliases: Mapping[str, str]) -> None:
        self._call("set_aliases", dict(aliases))

    def switch(self, route: ModelRoute, aliases: frozenset[str], replaced: str | None) -> None:
        self._call("switch", route, aliases, replaced)

    def hold(self, holds: Mapping[str, float | None]) -> None:
        self._call("hold", dict(holds))

    def release(self, aliases: Iterable[str] | None = None) -> None:
        self._call("release", None if aliases is None else sorted(aliases))

    def in_flight(self, app: str, min_version: int) -> int | None:
        count: int | None = self._call("in_flight", app, min_version)
        return count

    def idle_seconds(self) -> dict[str, float]:
        idle: dict[str, float] = self._call("idle_seconds")
        return idle

    def take_wake_requests(self, timeout_s: float) -> list[str]:
        names: list[str] = self._call("take_wake_requests", timeout_s)
        return names
