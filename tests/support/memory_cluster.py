"""The cluster ports in memory: routes, Serve applications and nodes, with faults on call.

`MemoryRoutes` is a routing table with in-flight counts, `MemoryServe` a record of Serve
applications (each deploy is one engine start), `MemoryNodes` a node whose staged models
are directories holding a real (tiny) config.json, so admission runs for real on them.
A `KillSwitch` stops the "manager" at a named point, as SIGKILL would.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cluster.fleet.journal import Journal
from cluster.fleet.ports import (
    AppStatus,
    ClusterPorts,
    Deployed,
    DeployFailed,
    NodeStaged,
    NodeStageOutcome,
    PrefetchReport,
    StagedWeights,
    StartReport,
)
from cluster.fleet.startup_steps import startup_steps
from cluster.inventory.records import GpuFactSource, NodeFacts, ProbedCluster
from cluster.staging.disk_report import WeightsDiskReport
from domain.app_name import AppName
from domain.deployment_config import ModelDeploymentConfig
from domain.engine_capacity import CapacityFigures
from domain.fleet_state import FleetState
from domain.model_state import ModelState
from serve_apps.engine.weights_locator import WeightsLocator
from serve_apps.registry.routing_table import ModelRoute, RoutingTable

NODE_ID = "a" * 56
OTHER_NODE_IDS = tuple(c * 56 for c in "bcdef")
STANDIN_RESOURCE = "accel_slot"

# A Llama-shaped config small enough for a 4 GiB stand-in slot.
TINY_LLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 1024,
    "max_position_embeddings": 2048,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}


class Killed(BaseException):
    """The manager process died here. A BaseException, so no `except Exception` in the
    engine can swallow it: nothing after the kill point runs, exactly as with SIGKILL."""


@dataclass
class KillSwitch:
    """Fires once when the engine reaches `point` for `subject` (None: any subject)."""

    point: str | None = None
    subject: str | None = None
    fired: bool = False

    def check(self, point: str, subject: str | None = None) -> None:
        if self.fired or point != self.point:
            return
        if self.subject is not None and subject != self.subject:
            return
        self.fired = True
        raise Killed(f"killed at {point} ({subject})")


@dataclass
class MemoryRoutes:
    """The registry: a routing table, and what gateways report in flight per model."""

    table: RoutingTable = field(default_factory=RoutingTable)
    in_flight_by_model: dict[str, int] = field(default_factory=dict)
    kill: KillSwitch = field(default_factory=KillSwitch)
    table_open: bool = True
    wakes_wanted: list[str] = field(default_factory=list)
    """What gateways asked to wake, until the manager takes it."""
    idle_s: dict[str, float] = field(default_factory=dict)
    """Seconds since each model's last request (0 for a model not listed)."""

    def routing_table(self) -> RoutingTable:
        return self.table

    def is_open(self) -> bool:
        return self.table_open

    def open_table(self) -> None:
        self.table_open = True

    def lose_state(self) -> None:
        """A registry restarted with no saved state: an empty table of a new epoch, shut."""
        self.table = RoutingTable(epoch=f"after-{self.table.epoch or 'start'}")
        self.table_open = False

    def put_route(self, route: ModelRoute) -> None:
        self.table = self.table.with_model(route)

    def set_route_state(self, name: str, state: ModelState, error: str | None = None) -> None:
        self.table = self.table.with_state(name, state, error)

    def remove_route(self, name: str, replaced_by: str | None = None) -> None:
        self.table = self.table.without_model(name, replaced_by)

    def set_aliases(self, aliases: Mapping[str, str]) -> None:
        self.table = self.table.with_aliases(aliases)

    def switch(self, route: ModelRoute, aliases: frozenset[str], replaced: str | None) -> None:
        self.kill.check("switch", route.name)
        self.table = self.table.with_switch(route, aliases, replaced)
        self.kill.check("switched", route.name)

    def hold(self, holds: Mapping[str, float | None]) -> None:
        self.table = self.table.with_holds(holds)

    def release(self, aliases: Iterable[str] | None = None) -> None:
        self.table = self.table.without_holds(aliases)

    def in_flight(self, app: str, min_version: int) -> int | None:
        parsed = AppName.parse(app)
        name = parsed.model if parsed is not None else app
        self.kill.check("drain", name)
        return self.in_flight_by_model.get(name, 0)

    def idle_seconds(self) -> dict[str, float]:
        return {name: self.idle_s.get(name, 0.0) for name in self.table.models}

    def take_wake_requests(self, timeout_s: float) -> list[str]:
        taken = sorted(set(self.wakes_wanted))
        self.wakes_wanted.clear()
        return taken


@dataclass
class MemoryServe:
    """Serve applications by name with their status; faults injected per model name."""

    apps: dict[str, AppStatus] = field(default_factory=dict)
    deployed: list[str] = field(default_factory=list)
    """Every app a deploy was started for, in order (each is an engine start)."""
    kill: KillSwitch = field(default_factory=KillSwitch)
    fail_deploy: set[str] = field(default_factory=set)
    fail_warm_up: set[str] = field(default_factory=set)
    placement_refused: set[str] = field(default_factory=set)
    slots_per_app: dict[str, int] = field(default_factory=dict)
    freed_in_time: bool = True
    start_s: float = 3.0
    """What a deploy reports it took (nothing waits)."""
    configs: dict[str, ModelDeploymentConfig] = field(default_factory=dict)
    asleep: dict[str, int] = field(default_factory=dict)
    """App -> the sleep level its engine's replicas are at."""
    engine_calls: list[tuple[str, str, int]] = field(default_factory=list)
    """Every sleep and wake, in order: (call, app, level)."""
    fail_wake: set[str] = field(default_factory=set)
    logged: dict[str, CapacityFigures] = field(default_factory=dict)
    """What each model's engine "logs" of its capacity when it starts (by model name)."""

    def placement_problem(self, config: ModelDeploymentConfig) -> str | None:
        if config.name in self.placement_refused:
            return "no node has the free accelerators (injected)"
        return None

    def start_deploy(
        self,
        app: AppName,
        config: ModelDeploymentConfig,
        model_path: Path,
        weights: WeightsLocator | None = None,
    ) -> float:
        self.kill.check("deploy:before", app.model)
        self.apps[app.app] = AppStatus.DEPLOYING
        self.deployed.append(app.app)
        self.configs[app.app] = config
        return 1000.0

    def wait_deployed(self, app: AppName, started_at: float, timeout_s: float) -> Deployed:
        config = self.configs[app.app]
        self.kill.check("deploy:starting", app.model)
        if app.model in self.fail_deploy:
            self.apps.pop(app.app, None)
            raise DeployFailed("Engine core initialization failed (injected)")
        self.apps[app.app] = AppStatus.RUNNING
        self.slots_per_app[app.app] = config.layout.gpus_per_replica * config.replicas
        return Deployed(started_at=started_at, running_at=started_at + self.start_s)

    def start_report(self, app: AppName, deployed: Deployed, warm_up_s: float) -> StartReport:
        steps = startup_steps(
            deploy_started=deployed.started_at,
            running=deployed.running_at,
            worker=None,
            engine=None,
            warm_up_s=warm_up_s,
        )
        return StartReport(steps=steps, capacity=self.logged.get(app.model, CapacityFigures()))

    def warm_up(self, app: AppName, timeout_s: float) -> None:
        self.kill.check("warm_up", app.model)
        if app.model in self.fail_warm_up:
            raise DeployFailed("warm-up request failed: engine died (injected)")

    def delete(self, app: str) -> None:
        self.kill.check("delete", app)
        self.apps.pop(app, None)
        self.asleep.pop(app, None)
        self.slots_per_app.pop(app, None)
        self.kill.check("deleted", app)

    def sleep(self, app: AppName, level: int) -> None:
        self.kill.check("sleep", app.model)
        self.asleep[app.app] = level
        self.engine_calls.append(("sleep", app.app, level))

    def wake(self, app: AppName, level: int) -> None:
        self.kill.check("wake", app.model)
        if app.model in self.fail_wake:
            raise DeployFailed("wake_up failed: CUDA error (injected)")
        self.asleep.pop(app.app, None)
        self.engine_calls.append(("wake", app.app, level))

    def statuses(self) -> dict[str, AppStatus]:
        return dict(self.apps)

    def running_replicas(self) -> dict[str, int]:
        return {name: int(s is AppStatus.RUNNING) for name, s in self.apps.items()}

    def claimed_by(self, app: str, resource: str) -> dict[str, int]:
        slots = self.slots_per_app.get(app, 0)
        return {NODE_ID[:12]: slots} if slots else {}

    def wait_freed(self, freed: Mapping[str, int], resource: str, timeout_s: float) -> bool:
        self.kill.check("wait_freed")
        return self.freed_in_time


@dataclass
class MemoryNodes:
    """One CPU node with `slots` stand-in accelerators, or GPUs of `gpu_model`; staging
    writes a tiny model dir."""

    root: Path
    slots: int = 4
    slot_memory_gib: float = 4.0
    gpu_model: str | None = None
    """A GPU profile name: the node declares `slots` GPUs of it instead of stand-ins."""
    more_nodes: int = 0
    """Nodes beside the first, each with `slots` free accelerators of the same kind (nothing
    is ever counted as claimed on them)."""
    ray_accelerator_type: str | None = None
    """Ray's `accelerator_type:` of the GPUs (a GPU node's label), if any."""
    host_ram_bytes: int = 64 * 2**30
    disk_free_bytes: int = 100 * 2**30
    kill: KillSwitch = field(default_factory=KillSwitch)
    staging_error: dict[str, Exception] = field(default_factory=dict)
    staged: list[str] = field(default_factory=list)
    prefetched: list[Path] = field(default_factory=list)
    released: list[frozenset[str]] = field(default_factory=list)
    """The serving sources each `release` call kept pinned."""
    serve: MemoryServe | None = None
    """Whose applications hold slots (Ray shows them as not available)."""

    def stage(self, source: str) -> StagedWeights:
        self.kill.check("staging", source)
        if source in self.staging_error:
            raise self.staging_error[source]
        self.staged.append(source)
        directory = self._model_dir(source)
        here = NodeStaged(NODE_ID[:12], NodeStageOutcome.REUSED, 0, directory)
        return StagedWeights(directory, (here,))

    def locator(self, source: str) -> WeightsLocator | None:
        return None  # one node: the staged directory is what the replica loads

    def release(self, serving: frozenset[str]) -> None:
        self.released.append(serving)

    def read_config(self, source: str) -> Path:
        return self._model_dir(source)

    def _model_dir(self, source: str) -> Path:
        directory = self.root / source.replace(":", "_").replace("/", "_")
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "config.json").write_text(json.dumps(TINY_LLAMA_CONFIG))
        return directory

    def probe(self) -> ProbedCluster:
        facts = NodeFacts(
            node_id=NODE_ID,
            node_ip="127.0.0.1",
            hostname="memory",
            accelerator="standin" if self.gpu_model is None else "gpu",
            gpu_model=self.gpu_model or "cpu-standin",
            gpu_count=self.slots,
            gpu_memory_bytes=int(self.slot_memory_gib * 2**30),
            interconnect=None,
            disk_free_bytes=self.disk_free_bytes,
            host_ram_bytes=self.host_ram_bytes,
            cache_dir=str(self.root),
            source=GpuFactSource.DECLARED,
            ray_accelerator_type=self.ray_accelerator_type,
        )
        claimed = sum(self.serve.slots_per_app.values()) if self.serve else 0
        key = STANDIN_RESOURCE if self.gpu_model is None else "GPU"
        available = {NODE_ID: {key: float(self.slots - claimed), "CPU": 8.0}}
        totals = {NODE_ID: {key: float(self.slots), "CPU": 8.0}}
        others = [
            replace(facts, node_id=other, node_ip=f"127.0.0.{i + 2}")
            for i, other in enumerate(OTHER_NODE_IDS[: self.more_nodes])
        ]
        for other in others:
            available[other.node_id] = {key: float(self.slots), "CPU": 8.0}
            totals[other.node_id] = {key: float(self.slots), "CPU": 8.0}
        return ProbedCluster(
            facts=(facts, *others), available=available, problems=(), totals=totals
        )

    def weights_report(self, source: str, probed: ProbedCluster) -> WeightsDiskReport:
        return WeightsDiskReport(
            source=source, total_bytes=2**20, weight_bytes=2**20, files=2, verdicts=()
        )

    def prefetch(self, model_dir: Path) -> PrefetchReport:
        self.prefetched.append(model_dir)
        return PrefetchReport(read_bytes=2**20, seconds=0.0)


@dataclass
class MemoryCluster:
    """The three ports together, sharing one kill switch."""

    root: Path
    kill: KillSwitch = field(default_factory=KillSwitch)
    routes: MemoryRoutes = field(init=False)
    serve: MemoryServe = field(init=False)
    nodes: MemoryNodes = field(init=False)

    def __post_init__(self) -> None:
        self.routes = MemoryRoutes(kill=self.kill)
        self.serve = MemoryServe(kill=self.kill)
        self.nodes = MemoryNodes(self.root, kill=self.kill, serve=self.serve)

    @property
    def ports(self) -> ClusterPorts:
        return ClusterPorts(routes=self.routes, serve=self.serve, nodes=self.nodes)

    def arm(self, point: str, subject: str | None = None) -> None:
        self.kill.point, self.kill.subject, self.kill.fired = point, subject, False


@dataclass
class FakeClock:
    """Time that passes only when the engine sleeps."""

    now: float = 1000.0
    slept: list[float] = field(default_factory=list)

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class KillingJournal(Journal):
    """The real journal; the kill switch fires right after a phase entry or a snapshot is
    durable (`journaled:<phase>`, `snapshot_saved:<phase>`)."""

    def __init__(self, state_dir: Path, kill: KillSwitch) -> None:
        super().__init__(state_dir)
        self._kill = kill
        self._phase = ""

    def append(self, entry: dict[str, Any]) -> None:
        super().append(entry)
        if entry.get("event") == "start":
            self._phase = ""
        elif entry.get("event") == "phase":
            self._phase = str(entry.get("phase"))
            self._kill.check(f"journaled:{self._phase}")

    def save_snapshot(self, snapshot: FleetState) -> None:
        super().save_snapshot(snapshot)
        self._kill.check(f"snapshot_saved:{self._phase}")
