"""A fleet engine over the in-memory cluster (memory_cluster.py) and its state directory,
restartable as the manager actor is: the `fleet` fixture of the unit tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cluster.fleet.fleet_engine import FleetEngine
from cluster.fleet.fleet_metrics import RecordingFleetMetrics
from cluster.fleet.journal import Journal
from cluster.fleet.manager_settings import ManagerSettings
from domain.deployment_config import AcceleratorConfig
from serve_apps.engine.fake_engine import FakeEngineSettings
from tests.support.fleet_configs import CPU
from tests.support.memory_cluster import FakeClock, KillingJournal, MemoryCluster


@dataclass
class Fleet:
    """One cluster and state directory; `engine` is the manager's current lifetime."""

    state_dir: Path
    cluster: MemoryCluster
    clock: FakeClock = field(default_factory=FakeClock)
    metrics: RecordingFleetMetrics = field(default_factory=RecordingFleetMetrics)
    accelerator: AcceleratorConfig = CPU
    fake_engines: FakeEngineSettings | None = None
    """The manager's stand-in engine settings (`up --fake-engines`): its engines share
    accelerators when they sleep (domain/accelerator_sharing.py)."""
    engine: FleetEngine = field(init=False)

    def __post_init__(self) -> None:
        self.engine = self.restart()

    @property
    def settings(self) -> ManagerSettings:
        return ManagerSettings(
            state_dir=self.state_dir,
            accelerator=self.accelerator,
            drain_timeout_s=5,
            free_timeout_s=5,
            fake_engines=self.fake_engines,
        )

    @property
    def journal(self) -> Journal:
        return Journal(self.settings.manager_dir)

    def restart(self) -> FleetEngine:
        """A new engine over the same state dir and cluster, reconciled (as after the
        actor restarted)."""
        journal = KillingJournal(self.settings.manager_dir, self.cluster.kill)
        self.engine = FleetEngine(
            self.settings, self.cluster.ports, journal, self.metrics, self.clock
        )
        self.engine.reconcile()
        return self.engine
