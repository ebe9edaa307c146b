"""Serve stood in, the real rest: the registry actor, journal, admission and staging.

Only what would start a vLLM engine (Serve applications, the warm-up request) is replaced,
by the in-memory Serve of tests/support/memory_cluster.py: every real swap phase costs one
to two engine starts (minutes here) and there are thirteen kill points. The routes go to
the real registry actor and the nodes are really probed and staged onto, each wrapped only
to fire the kill switch at its point. The real-stack kill in `deploying_new` is
tests/e2e/test_hot_swap.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cluster.fleet.manager_settings import ManagerSettings
from cluster.fleet.ports import ClusterPorts, PrefetchReport, StagedWeights
from cluster.inventory.records import ProbedCluster
from cluster.ray_adapters.ray_nodes import RayNodes
from cluster.ray_adapters.registry_routes import RegistryRoutes
from cluster.staging.disk_report import WeightsDiskReport
from domain.app_name import AppName
from serve_apps.engine.weights_locator import WeightsLocator
from serve_apps.registry.routing_table import ModelRoute
from tests.support.memory_cluster import KillSwitch, MemoryServe


class KillingRoutes(RegistryRoutes):
    """The real registry; the kill switch fires when the drain first asks for counts, and
    right after a switch moved the aliases."""

    def __init__(self, registry: Any, kill: KillSwitch) -> None:
        super().__init__(registry)
        self._kill = kill

    def in_flight(self, app: str, min_version: int) -> int | None:
        parsed = AppName.parse(app)
        self._kill.check("drain", parsed.model if parsed is not None else app)
        return super().in_flight(app, min_version)

    def switch(self, route: ModelRoute, aliases: frozenset[str], replaced: str | None) -> None:
        super().switch(route, aliases, replaced)
        self._kill.check("switched", route.name)


class KillingNodes:
    """Real probes and staging; the kill switch fires as staging starts, and a source can
    be made to fail staging with a given error (a disk that fills)."""

    def __init__(
        self,
        settings: ManagerSettings,
        kill: KillSwitch,
        staging_error: Mapping[str, Exception] | None = None,
    ) -> None:
        self._real = RayNodes(settings)
        self._kill = kill
        self._staging_error = dict(staging_error or {})

    def stage(self, source: str) -> StagedWeights:
        self._kill.check("staging", source)
        if source in self._staging_error:
            raise self._staging_error[source]
        return self._real.stage(source)

    def locator(self, source: str) -> WeightsLocator | None:
        return self._real.locator(source)

    def release(self, serving: frozenset[str]) -> None:
        self._real.release(serving)

    def read_config(self, source: str) -> Path:
        return self._real.read_config(source)

    def probe(self) -> ProbedCluster:
        return self._real.probe()

    def weights_report(self, source: str, probed: ProbedCluster) -> WeightsDiskReport:
        return self._real.weights_report(source, probed)

    def prefetch(self, model_dir: Path) -> PrefetchReport:
        return self._real.prefetch(model_dir)


def standin_ports(
    settings: ManagerSettings,
    registry: Any,
    serve: MemoryServe,
    kill: KillSwitch,
    staging_error: Mapping[str, Exception] | None = None,
) -> ClusterPorts:
    return ClusterPorts(
        routes=KillingRoutes(registry, kill),
        serve=serve,
        nodes=KillingNodes(settings, kill, staging_error),
    )
