"""What the fleet engine needs from the live cluster: three typed ports, and a clock.

- `RoutePort`: the fleet registry (routes, aliases, holds, in-flight counts), which every
  gateway replica follows;
- `ServePort`: Serve applications of models (deploy, delete, status, warm-up) and the
  accelerators their placement groups hold;
- `NodePort`: the nodes themselves (weights staged onto them, their probed hardware).

`registry_routes.py`, `serve_control.py` and `ray_nodes.py` (cluster/ray_adapters/) implement
them on Ray and Serve; tests/support/memory_cluster.py in memory, so every operation,
rollback and restart is unit-tested without Ray.

Waiting for the cluster to reach a state goes through `wait_for` and a `Clock`, which tests
drive by hand.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol, TypeVar

from cluster.fleet.startup_steps import StartupSteps
from cluster.inventory.records import ProbedCluster
from cluster.staging.disk_report import WeightsDiskReport
from domain.app_name import AppName
from domain.deployment_config import ModelDeploymentConfig
from domain.engine_capacity import CapacityFigures
from domain.model_state import ModelState
from serve_apps.engine.weights_locator import WeightsLocator
from serve_apps.registry.routing_table import ModelRoute, RoutingTable


@dataclass(frozen=True)
class Deployed:
    """When a deployment started and when Serve first reported it running (Unix times)."""

    started_at: float
    running_at: float


@dataclass(frozen=True)
class StartReport:
    """What a started app's replica reported of its start: where the time went and what its
    engine logged of its capacity (both read from one pass over its log)."""

    steps: StartupSteps
    capacity: CapacityFigures


class DeployFailed(Exception):
    """The model did not come up; the message carries the engine's own error."""


class PlacementRefused(DeployFailed):
    """The layout's placement group cannot be placed on the cluster as it is now."""


class AppStatus(StrEnum):
    """A Serve application's status, as far as the fleet engine cares."""

    DEPLOYING = "deploying"
    """Replicas are being placed or started (or re-placed after losing them)."""
    RUNNING = "running"
    """Every replica runs and passed its health check."""
    UNHEALTHY = "unhealthy"
    """It ran and lost replicas; Serve is replacing them."""
    FAILED = "failed"
    """It could not be deployed."""
    DELETING = "deleting"


class RoutesUnavailable(Exception):
    """The registry did not answer within its deadline (Ray is starting it again after the
    head's loss): the call's change may not have been made."""


class RoutePort(Protocol):
    """Every call raises RoutesUnavailable rather than wait forever for the registry."""

    def routing_table(self) -> RoutingTable: ...

    def is_open(self) -> bool:
        """False when the registry restarted without its saved state: it publishes nothing
        until the manager has rebuilt the table (reconcile.republish) and opened it."""

    def open_table(self) -> None:
        """The table is whole again: the registry may publish it to the gateways."""

    def put_route(self, route: ModelRoute) -> None: ...

    def set_route_state(self, name: str, state: ModelState, error: str | None = None) -> None: ...

    def remove_route(self, name: str, replaced_by: str | None = None) -> None:
        """`name` becomes a tombstone (naming its replacement); its aliases are dropped."""

    def set_aliases(self, aliases: Mapping[str, str]) -> None:
        """Each alias pointing at its model, in one routing-table version."""

    def switch(self, route: ModelRoute, aliases: frozenset[str], replaced: str | None) -> None:
        """`route` READY and serving `aliases`, the model it replaces a tombstone naming it,
        the aliases released: one routing-table version (RoutingTable.with_switch)."""

    def hold(self, holds: Mapping[str, float | None]) -> None:
        """Requests for these aliases wait in the gateways instead of failing, each until
        its predicted end (Unix time; None when it cannot be told)."""

    def release(self, aliases: Iterable[str] | None = None) -> None:
        """The holds of `aliases` end (None: every hold)."""

    def in_flight(self, app: str, min_version: int) -> int | None:
        """Requests in flight for the Serve app `app` (one deployment of a model) over every
        live gateway replica; None until all of them have seen routing table
        `min_version`."""

    def take_wake_requests(self, timeout_s: float) -> list[str]:
        """Parked models the gateways asked to wake (they hold requests for them) since the
        last call; waits up to `timeout_s` for one."""

    def idle_seconds(self) -> dict[str, float]:
        """Per model: seconds since a gateway last forwarded a request for it."""


class ServePort(Protocol):
    def placement_problem(self, config: ModelDeploymentConfig) -> str | None:
        """Why `config`'s placement groups cannot be placed now; None if they can."""

    def start_deploy(
        self,
        app: AppName,
        config: ModelDeploymentConfig,
        model_path: Path,
        weights: WeightsLocator | None = None,
    ) -> float:
        """Create the app without waiting for it (its replicas may wait for resources); the
        Unix time it started. Raises DeployFailed (the app is deleted then). `weights`: how
        each replica finds the weights on its own node (else it loads `model_path`)."""

    def wait_deployed(self, app: AppName, started_at: float, timeout_s: float) -> Deployed:
        """Wait until the app started at `started_at` runs; raises DeployFailed (the app is
        deleted then)."""

    def start_report(self, app: AppName, deployed: Deployed, warm_up_s: float) -> StartReport:
        """Where the app's start went, from what Ray and the engine reported of it, and what
        its engine logged of its capacity (weights, KV cache, CUDA graphs; empty figures
        where its log shows none, as a fake engine's)."""

    def warm_up(self, app: AppName, timeout_s: float) -> None:
        """One real request through the app's own handle; raises DeployFailed."""

    def delete(self, app: str) -> None:
        """Delete the app and wait until Serve has removed it (never raises)."""

    def sleep(self, app: AppName, level: int) -> None:
        """Put every replica of the app's engine to sleep at `level` (vLLM's sleep mode;
        a replica asleep already is left so); raises DeployFailed."""

    def wake(self, app: AppName, level: int) -> None:
        """Wake every replica of the app's engine; after level 2 each reloads its weights
        (`reload_weights` on every worker). A replica awake already is left so; raises
        DeployFailed."""

    def statuses(self) -> dict[str, AppStatus]:
        """Every Serve application that exists now."""

    def running_replicas(self) -> dict[str, int]:
        """Serve application -> replicas RUNNING now."""

    def claimed_by(self, app: str, resource: str) -> dict[str, int]:
        """Ranks per node (id cut to 12) holding accelerators (`resource`) in the app's
        groups: one accelerator each, or half of one for a sleep-mode engine's rank
        (domain/accelerator_sharing.py)."""

    def wait_freed(self, freed: Mapping[str, int], resource: str, timeout_s: float) -> bool:
        """Wait until `freed` (node -> count) is seen free again; False at the deadline."""


class NodePort(Protocol):
    def stage(self, source: str) -> StagedWeights:
        """Get the weights of `source` onto every node that may host one of its replicas
        (each node judged, reserved and pinned on its own cache). Raises with the reason,
        naming the node (full disk, hub error), before any node downloads a byte."""

    def locator(self, source: str) -> WeightsLocator | None:
        """How a replica of `source` finds (or stages) the weights on its own node; None
        where `stage`'s model directory is what every replica loads."""

    def release(self, serving: frozenset[str]) -> None:
        """Unpin, on every node, the weights of sources that are not in `serving`."""

    def read_config(self, source: str) -> Path:
        """A directory with what admission reads (config, index), without the weights."""

    def probe(self) -> ProbedCluster:
        """Every alive node's hardware after the operator's overrides."""

    def weights_report(self, source: str, probed: ProbedCluster) -> WeightsDiskReport:
        """The weights' real size and each node's disk verdict, without staging."""

    def prefetch(self, model_dir: Path) -> PrefetchReport:
        """Read a staged model's weight files into the page cache, when the node's
        available memory (less a reserve) covers them."""


class NodeStageOutcome(StrEnum):
    DOWNLOADED = "downloaded"
    REUSED = "reused"
    """Already staged in the node's cache."""
    SHARED = "shared"
    """The node sees a cache another node staged."""

    @classmethod
    def of(cls, reused: bool, *, shared: bool) -> NodeStageOutcome:
        if shared:
            return cls.SHARED
        return cls.REUSED if reused else cls.DOWNLOADED


@dataclass(frozen=True)
class NodeStaged:
    """What staging did on one node."""

    node: str
    outcome: NodeStageOutcome
    downloaded_bytes: int
    path: Path

    def describe(self) -> str:
        what = {
            NodeStageOutcome.DOWNLOADED: f"{self.downloaded_bytes / 2**20:.1f} MiB downloaded",
            NodeStageOutcome.REUSED: "already staged",
            NodeStageOutcome.SHARED: "shares a cache staged by another node",
        }[self.outcome]
        return f"node {self.node}: {what} at {self.path}"


@dataclass(frozen=True)
class StagedWeights:
    model_dir: Path
    """A directory the manager reads the model's config from (its own node's copy)."""
    nodes: tuple[NodeStaged, ...] = ()
    """Each node that holds the weights now (the operation's events and metrics)."""


@dataclass(frozen=True)
class PrefetchReport:
    read_bytes: int
    seconds: float
    skipped: str | None = None
    """Why nothing was read (not enough available memory), if so."""

    def describe(self) -> str:
        if self.skipped is not None:
            return f"weights not prefetched: {self.skipped}"
        return (
            f"read {self.read_bytes / 2**30:.2f} GiB of weights into the page cache in "
            f"{self.seconds:.1f} s"
        )


@dataclass(frozen=True)
class ClusterPorts:
    routes: RoutePort
    serve: ServePort
    nodes: NodePort


# --- Waiting for the cluster to reach a state, on a clock tests can drive

T = TypeVar("T")


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def wait_for(
    probe: Callable[[], T | None],
    *,
    timeout_s: float,
    poll_s: float,
    clock: Clock,
) -> T | None:
    """Poll `probe` until it returns something other than None (returned), or None once
    `timeout_s` has passed. The probe runs at least once, and once more at the deadline;
    an exception it raises ends the wait (a state that will never come)."""
    deadline = clock.monotonic() + timeout_s
    while True:
        found = probe()
        if found is not None:
            return found
        left = deadline - clock.monotonic()
        if left <= 0:
            return None
        clock.sleep(min(poll_s, left))
