"""What every fleet operation works with: settings, the cluster ports, the journal, metrics,
the clock, and the desired state, which is saved on every change."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from cluster.fleet.fleet_metrics import FleetMetrics
from cluster.fleet.journal import Journal
from cluster.fleet.manager_settings import ManagerSettings
from cluster.fleet.ports import Clock, ClusterPorts
from domain.app_name import AppName
from domain.deployment_config import ModelDeploymentConfig
from domain.fleet_state import FleetModel, FleetState
from domain.model_state import ModelState
from serve_apps.registry.routing_table import ModelRoute


class DesiredFleet:
    """The fleet's desired state in memory, written to `fleet.json` on every change."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._state = journal.load_snapshot()

    @property
    def state(self) -> FleetState:
        return self._state

    def model(self, name: str) -> FleetModel | None:
        return self._state.models.get(name)

    def update(self, state: FleetState) -> None:
        self._journal.save_snapshot(state)
        self._state = state


@dataclass
class ResidentSince:
    """When each model's engine last became ready (the clock's monotonic seconds). In memory
    only: after a manager restart every model counts from the restart, which can only delay
    a park, never hasten one."""

    started_at: float
    since: dict[str, float] = field(default_factory=dict)

    def mark(self, name: str, at: float) -> None:
        self.since[name] = at

    def seconds(self, name: str, now: float) -> float:
        return now - self.since.get(name, self.started_at)


@dataclass(frozen=True)
class FleetContext:
    settings: ManagerSettings
    ports: ClusterPorts
    journal: Journal
    metrics: FleetMetrics
    clock: Clock
    desired: DesiredFleet
    resident: ResidentSince

    def publish_ready(self, app: AppName, config: ModelDeploymentConfig) -> None:
        """`config` serves as `app`: its route READY and its aliases pointing at it."""
        routes = self.ports.routes
        routes.put_route(model_route(app, config, ModelState.READY))
        self.point_aliases(config.aliases, config.name)

    def point_aliases(self, aliases: Iterable[str], name: str) -> None:
        """The one place aliases are written to the routing table."""
        moving = dict.fromkeys(aliases, name)
        if moving:
            self.ports.routes.set_aliases(moving)

    def release_holds(self, aliases: Iterable[str] | None = None) -> None:
        """The holds of `aliases` end (None: every hold, as after a restart)."""
        self.ports.routes.release(aliases)


def model_route(app: AppName, config: ModelDeploymentConfig, state: ModelState) -> ModelRoute:
    return ModelRoute(
        name=config.name,
        app_name=app.app,
        deployment_name=app.deployment,
        state=state,
        source=config.source,
        layout=str(config.layout),
        replicas=config.replicas,
    )
