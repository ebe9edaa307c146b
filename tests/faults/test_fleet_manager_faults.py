"""The fleet engine under faults, against real Ray with Serve stood in:

- killed at each point of a hot swap, a restarted manager converges to exactly one
  consistent state every time (one model serving `default`, recorded with its own config,
  the other gone from Serve and the routing table, nothing held, the journal closed);
- a disk that fills while NEW is staged rejects the swap before OLD is touched;
- a model that loses its replicas (engine or node lost) is marked DEGRADED with the reason,
  and READY again once Serve has re-placed it;
- killed at each point of a park or a wake, a restarted manager leaves the model either
  parked (no app, route PARKED) or serving (its app running, route READY), never between.

Real: a local Ray instance, the registry actor, the journal on disk, the node probes,
admission and staging. Stood in: Serve applications and the warm-up request (see
serve_standin.py for why). The same matrix runs in memory in tests/unit/fleet; this one
proves it against the real registry and staging. Each kill case prints a
`phase -> outcome` row; RELIABILITY.md carries the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cluster.fleet.fleet_engine import FleetEngine
from cluster.fleet.journal import Journal
from cluster.fleet.manager_settings import ManagerSettings
from cluster.fleet.ports import AppStatus
from cluster.staging.staging_errors import StagingError
from domain.app_name import AppName
from domain.fleet_state import FleetState
from domain.model_state import ModelState
from domain.operation import Outcome, SwapStrategy
from domain.operation_request import ParkRequest, SwapRequest, WakeRequest
from tests.support.fleet_configs import CPU, OLD, new_model
from tests.support.memory_cluster import Killed, KillingJournal, KillSwitch, MemoryServe

from .serve_standin import standin_ports

# The same miniature as OLD: staging it is real, and done once for the module.
NEW = new_model("miniature:llama")
OLD_APP = AppName(OLD.name, 1)


@dataclass(frozen=True)
class KillCase:
    label: str
    point: str
    model: str | None
    survivor: str
    """The model serving `default` once the restarted manager has reconciled."""
    outcome: str
    redeploys: int
    """Engine starts the restart itself needs (OLD brought back)."""
    new_fails_warm_up: bool = False
    strategy: SwapStrategy = SwapStrategy.BREAK_BEFORE_MAKE


CASES = [
    KillCase("preflight (staging NEW)", "staging", None, OLD.name, "rolled_back", 0),
    KillCase("draining", "drain", OLD.name, OLD.name, "rolled_back", 0),
    # NEW's app is created before OLD's is deleted (early deploy, the default): killed once
    # OLD is gone and NEW waits for its accelerators.
    KillCase(
        "removing_old (OLD deleted, NEW waiting)",
        "deleted",
        OLD_APP.app,
        OLD.name,
        "rolled_back",
        1,
    ),
    KillCase(
        "deploying_new (NEW starting)", "deploy:starting", NEW.name, OLD.name, "rolled_back", 1
    ),
    KillCase("deploying_new (NEW warming up)", "warm_up", NEW.name, NEW.name, "done", 0),
    KillCase("switching (nothing moved yet)", "journaled:switching", None, NEW.name, "done", 0),
    KillCase("switching (snapshot written)", "snapshot_saved:switching", None, NEW.name, "done", 0),
    KillCase(
        "rolling_back (OLD redeploying)",
        "deploy:starting",
        OLD.name,
        OLD.name,
        "rolled_back",
        1,
        new_fails_warm_up=True,
    ),
]

MBB = SwapStrategy.MAKE_BEFORE_BREAK
# Make-before-break: OLD serves until the switch, so an interruption before it keeps OLD
# untouched (no engine start on restart), one after it completes the swap.
CASES += [
    KillCase(
        "mbb preflight (staging NEW)", "staging", None, OLD.name, "rolled_back", 0, False, MBB
    ),
    KillCase(
        "mbb deploying_new (NEW starting)",
        "deploy:starting",
        NEW.name,
        OLD.name,
        "rolled_back",
        0,
        False,
        MBB,
    ),
    KillCase(
        "mbb deploying_new (NEW warming up)",
        "warm_up",
        NEW.name,
        OLD.name,
        "rolled_back",
        0,
        False,
        MBB,
    ),
    KillCase(
        "mbb switching (aliases moved)", "switched", NEW.name, NEW.name, "done", 0, False, MBB
    ),
    KillCase("mbb draining", "drain", OLD.name, NEW.name, "done", 0, False, MBB),
    KillCase(
        "mbb removing_old (deleting OLD)", "delete", OLD_APP.app, NEW.name, "done", 0, False, MBB
    ),
]


@dataclass
class Fleet:
    """One manager lifetime: what a restart rebuilds from the state dir."""

    engine: FleetEngine
    journal: Journal


def _settings(state_dir: Path) -> ManagerSettings:
    return ManagerSettings(
        state_dir=state_dir, accelerator=CPU, drain_timeout_s=5, free_timeout_s=5
    )


def _start_manager(
    state_dir: Path,
    registry: Any,
    serve: MemoryServe,
    kill: KillSwitch,
    miniatures: Path,
    staging_error: dict[str, Exception] | None = None,
) -> Fleet:
    serve.kill = kill
    # The staging cache is shared by the module's tests: the miniature is generated once.
    settings = _settings(state_dir)
    staging = _settings(miniatures)
    journal = KillingJournal(settings.manager_dir, kill)
    engine = FleetEngine(
        settings, standin_ports(staging, registry, serve, kill, staging_error), journal
    )
    engine.reconcile()
    return Fleet(engine, journal)


def _serving_old(state_dir: Path, serve: MemoryServe) -> None:
    """OLD was serving `default` before the swap began."""
    Journal(state_dir / "manager").save_snapshot(FleetState().with_model(OLD, 1))
    serve.apps[OLD_APP.app] = AppStatus.RUNNING


def _swap_request(strategy: SwapStrategy = SwapStrategy.AUTO) -> SwapRequest:
    return SwapRequest(old=OLD.name, config=NEW, strategy=strategy)


def _assert_one_consistent_state(
    fleet: Fleet, registry: Any, serve: MemoryServe, survivor: str
) -> None:
    import ray

    gone = NEW.name if survivor == OLD.name else OLD.name
    original = OLD if survivor == OLD.name else NEW
    state = fleet.engine.fleet()
    assert set(state.models) == {survivor}
    assert state.aliases == {"default": survivor}
    assert state.models[survivor].config == original.model_copy(update={"aliases": ("default",)})
    assert fleet.journal.load_snapshot() == state
    assert serve.apps == {state.models[survivor].app.app: AppStatus.RUNNING}
    table = ray.get(registry.table.remote())
    assert table.models[survivor].state == ModelState.READY
    assert gone not in table.models or table.models[gone].state != ModelState.READY
    assert dict(table.aliases) == {"default": survivor}
    assert table.held_aliases == frozenset()
    assert fleet.journal.unfinished() is None


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_a_manager_killed_mid_swap_converges_to_one_consistent_state(
    case: KillCase, registry: Any, miniatures: Path, tmp_path: Path
) -> None:
    serve = MemoryServe()
    _serving_old(tmp_path, serve)
    kill = KillSwitch(case.point, case.model)
    if case.new_fails_warm_up:
        serve.fail_warm_up.add(NEW.name)
    before = _start_manager(tmp_path, registry, serve, kill, miniatures)
    with pytest.raises(Killed):
        before.engine.run(_swap_request(case.strategy))
    assert kill.fired
    interrupted = before.journal.unfinished()
    assert interrupted is not None
    starts_before = len(serve.deployed)

    # The actor restarts: a new manager over the same state dir, registry and Serve.
    serve.fail_warm_up.clear()
    after = _start_manager(tmp_path, registry, serve, KillSwitch(), miniatures)
    end = [e for e in after.journal.entries() if e.get("after_restart")][-1]
    assert end["outcome"] == case.outcome, end
    _assert_one_consistent_state(after, registry, serve, case.survivor)
    assert len(serve.deployed) - starts_before == case.redeploys
    print(
        f"\nPHASE-OUTCOME | {case.strategy} | {case.label} | journal phase "
        f"{interrupted.get('phase')} | "
        f"{end['outcome']} | {case.survivor} serves | engine starts on restart: "
        f"{case.redeploys}"
    )


def test_a_disk_that_fills_while_staging_new_rejects_the_swap_and_old_keeps_serving(
    registry: Any, miniatures: Path, tmp_path: Path
) -> None:
    import ray

    serve = MemoryServe()
    _serving_old(tmp_path, serve)
    full = StagingError(
        f"{NEW.source}: the cache volume filled up during the download (something else "
        "wrote to it; raise reserve_gib): [Errno 28] No space left on device"
    )
    fleet = _start_manager(
        tmp_path, registry, serve, KillSwitch(), miniatures, staging_error={NEW.source: full}
    )
    version = ray.get(registry.table.remote()).version
    result = fleet.engine.run(_swap_request())
    assert result.outcome is Outcome.REJECTED
    assert "filled up during the download" in result.message
    assert "nothing changed" in result.message
    phases = [e["phase"] for e in fleet.journal.entries() if e.get("event") == "phase"]
    assert phases == ["preflight"], "OLD was never drained"
    assert serve.deployed == []
    assert ray.get(registry.table.remote()).version == version, "routing table untouched"
    _assert_one_consistent_state(fleet, registry, serve, OLD.name)


def test_a_model_that_loses_its_replicas_is_degraded_then_ready_once_re_placed(
    registry: Any, miniatures: Path, tmp_path: Path
) -> None:
    import ray

    serve = MemoryServe()
    _serving_old(tmp_path, serve)
    fleet = _start_manager(tmp_path, registry, serve, KillSwitch(), miniatures)
    assert fleet.engine.check_health() == []

    serve.apps[OLD_APP.app] = AppStatus.UNHEALTHY  # its node is gone; Serve is re-placing it
    (change,) = fleet.engine.check_health()
    assert change.state is ModelState.DEGRADED
    route = ray.get(registry.table.remote()).models[OLD.name]
    assert route.state == ModelState.DEGRADED
    assert route.error and "re-placing it when capacity allows" in route.error
    assert fleet.engine.check_health() == [], "reported once, not on every pass"

    serve.apps[OLD_APP.app] = AppStatus.RUNNING  # a replica runs again elsewhere
    (change,) = fleet.engine.check_health()
    assert change.state is ModelState.READY
    assert ray.get(registry.table.remote()).models[OLD.name].state == ModelState.READY
    events = [e for e in fleet.journal.entries() if e.get("event") == "health"]
    assert [e["state"] for e in events] == ["degraded", "ready"]
    assert fleet.journal.unfinished() is None


@dataclass(frozen=True)
class ResidencyKill:
    label: str
    wake: bool
    """A wake of OLD parked first (else a park of OLD serving)."""
    point: str
    subject: str | None
    outcome: str
    parked: bool
    """Whether OLD is parked once the restarted manager has reconciled."""


RESIDENCY_KILLS = [
    ResidencyKill("park: draining", False, "drain", OLD.name, "rolled_back", False),
    ResidencyKill("park: unloaded", False, "deleted", OLD_APP.app, "done", True),
    ResidencyKill("wake: preflight (staging)", True, "staging", None, "failed", True),
    ResidencyKill("wake: engine starting", True, "deploy:starting", OLD.name, "failed", True),
    ResidencyKill("wake: warming up", True, "warm_up", OLD.name, "done", False),
]


@pytest.mark.parametrize("case", RESIDENCY_KILLS, ids=[c.label for c in RESIDENCY_KILLS])
def test_a_manager_killed_mid_park_or_wake_leaves_the_model_parked_or_serving(
    case: ResidencyKill, registry: Any, miniatures: Path, tmp_path: Path
) -> None:
    import ray

    serve = MemoryServe()
    _serving_old(tmp_path, serve)
    kill = KillSwitch()
    before = _start_manager(tmp_path, registry, serve, kill, miniatures)
    if case.wake:
        assert before.engine.run(ParkRequest(name=OLD.name)).outcome is Outcome.DONE
    kill.point, kill.subject = case.point, case.subject
    with pytest.raises(Killed):
        before.engine.run(WakeRequest(name=OLD.name) if case.wake else ParkRequest(name=OLD.name))
    assert kill.fired

    after = _start_manager(tmp_path, registry, serve, KillSwitch(), miniatures)
    end = [e for e in after.journal.entries() if e.get("after_restart")][-1]
    assert end["outcome"] == case.outcome, end
    model = after.engine.fleet().models[OLD.name]
    assert model.parked is case.parked
    table = ray.get(registry.table.remote())
    route = table.models[OLD.name]
    assert dict(table.aliases) == {"default": OLD.name}, "a parked model keeps its aliases"
    if case.parked:
        assert (route.state, serve.apps) == (ModelState.PARKED, {})
    else:
        assert route.state == ModelState.READY and route.app_name == model.app.app
        assert serve.apps == {model.app.app: AppStatus.RUNNING}
    assert after.journal.load_snapshot() == after.engine.fleet()
    assert after.journal.unfinished() is None
    print(f"\nRESIDENCY-OUTCOME | {case.label} | {end['outcome']} | parked: {case.parked}")
