"""A hot swap, phase by phase: each phase succeeding, failing, and the manager dying there.

After a death, a restarted engine must converge to exactly one consistent state every
time: one model serving `default`, recorded with its own config, the other gone from Serve
and the routing table, nothing held, the journal closed. In-memory cluster, no Ray.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from cluster.cluster_port import AppStatus
from domain.app_name import AppName
from domain.deployment_config import ModelDeploymentConfig
from domain.model_state import ModelState
from domain.operation import Outcome, SwapPhase
from domain.operation_request import AddRequest, SwapRequest
from tests.support.fleet_configs import OLD
from tests.support.memory_cluster import Killed
from tests.unit.fleet.conftest import NEW, Fleet

pytestmark = pytest.mark.unit

OLD_APP = AppName(OLD.name, 1)
NEW_APP = AppName(NEW.name, 1)
SWAP = SwapRequest(old=OLD.name, config=NEW)


@pytest.fixture
def serving(fleet: Fleet) -> Fleet:
    """OLD serves `default`."""
    assert fleet.engine.run(AddRequest(config=OLD)).outcome is Outcome.DONE
    fleet.cluster.serve.deployed.clear()
    fleet.cluster.nodes.staged.clear()
    return fleet


def _phases(fleet: Fleet) -> list[str]:
    return [e["phase"] for e in fleet.journal.entries() if e.get("event") == "phase"][2:]


def assert_one_consistent_state(fleet: Fleet, survivor: ModelDeploymentConfig) -> None:
    gone = NEW if survivor is OLD else OLD
    state = fleet.engine.fleet()
    assert set(state.models) == {survivor.name}
    assert state.aliases == {"default": survivor.name}
    assert state.models[survivor.name].config == survivor.model_copy(
        update={"aliases": ("default",)}
    )
    assert fleet.journal.load_snapshot() == state
    app = state.models[survivor.name].app.app
    assert fleet.cluster.serve.apps == {app: AppStatus.RUNNING}
    table = fleet.cluster.routes.table
    assert table.models[survivor.name].state is ModelState.READY
    assert table.models[survivor.name].app_name == app
    assert gone.name not in table.models or table.models[gone.name].state is not ModelState.READY
    assert dict(table.aliases) == {"default": survivor.name}
    assert table.held_aliases == frozenset()
    assert fleet.journal.unfinished() is None


class TestEveryPhaseSucceeds:
    def test_old_is_drained_removed_and_replaced_in_phase_order(self, serving: Fleet) -> None:
        serving.cluster.routes.in_flight_by_model[OLD.name] = 0
        result = serving.engine.run(SWAP)
        assert result.outcome is Outcome.DONE, result.message
        assert _phases(serving) == [
            SwapPhase.PREFLIGHT,
            SwapPhase.DRAINING,
            SwapPhase.REMOVING_OLD,
            SwapPhase.DEPLOYING_NEW,
            SwapPhase.SWITCHING,
        ]
        assert list(result.phase_seconds) == _phases(serving)
        assert_one_consistent_state(serving, NEW)
        tomb = serving.cluster.routes.table.models[OLD.name]
        assert (tomb.state, tomb.replaced_by) == (ModelState.REMOVED, NEW.name)
        assert serving.cluster.serve.deployed == [NEW_APP.app]
        assert serving.cluster.nodes.staged == [NEW.source], "NEW staged once"
        assert result.details.old == OLD.name and result.details.new_config == NEW
        assert serving.metrics.operations[-1][:2] == ("swap", "done")

    def test_the_held_aliases_cover_the_drain_to_the_switch(self, serving: Fleet) -> None:
        held_during: list[frozenset[str]] = []
        serve = serving.cluster.serve
        deploy = serve.deploy

        def watching_deploy(*args, **kwargs):
            held_during.append(serving.cluster.routes.table.held_aliases)
            return deploy(*args, **kwargs)

        serve.deploy = watching_deploy  # type: ignore[method-assign]
        serving.engine.run(SWAP)
        assert held_during == [frozenset({"default"})]
        assert serving.cluster.routes.table.held_aliases == frozenset()

    def test_a_dry_run_changes_nothing(self, serving: Fleet) -> None:
        version = serving.cluster.routes.table.version
        result = serving.engine.run(SwapRequest(old=OLD.name, config=NEW, dry_run=True))
        assert result.outcome is Outcome.DONE and "nothing changed" in result.message
        assert serving.cluster.routes.table.version == version
        assert_one_consistent_state(serving, OLD)


class TestEachPhaseFails:
    def test_preflight_admission_refuses_and_nothing_changes(self, serving: Fleet) -> None:
        serving.cluster.nodes.slot_memory_gib = 0.001
        version = serving.cluster.routes.table.version
        result = serving.engine.run(SWAP)
        assert result.outcome is Outcome.REJECTED
        assert "nothing changed" in result.message
        assert _phases(serving) == [SwapPhase.PREFLIGHT]
        assert serving.cluster.routes.table.version == version
        assert_one_consistent_state(serving, OLD)

    def test_preflight_a_full_disk_while_staging_new_refuses(self, serving: Fleet) -> None:
        serving.cluster.nodes.staging_error[NEW.source] = OSError("No space left on device")
        result = serving.engine.run(SWAP)
        assert result.outcome is Outcome.REJECTED
        assert "No space left on device" in result.message
        assert serving.cluster.serve.deployed == []
        assert_one_consistent_state(serving, OLD)

    def test_preflight_an_unknown_old_is_rejected(self, serving: Fleet) -> None:
        result = serving.engine.run(SwapRequest(old="ghost", config=NEW))
        assert result.outcome is Outcome.REJECTED
        assert "no model named 'ghost' to replace" in result.message

    def test_draining_past_the_deadline_goes_on_and_says_what_was_left(
        self, serving: Fleet
    ) -> None:
        serving.cluster.routes.in_flight_by_model[OLD.name] = 3
        started = serving.clock.now
        result = serving.engine.run(SWAP)
        assert result.outcome is Outcome.DONE
        assert any("3 requests still in flight" in e.message for e in result.events)
        assert serving.clock.now - started == pytest.approx(serving.settings.drain_timeout_s)

    def test_removing_old_accelerators_not_seen_free_in_time_goes_on(self, serving: Fleet) -> None:
        serving.cluster.serve.freed_in_time = False
        result = serving.engine.run(SWAP)
        assert result.outcome is Outcome.DONE
        assert any("not all seen free in time" in e.message for e in result.events)

    @pytest.mark.parametrize("failure", ["deploy", "warm_up"])
    def test_deploying_new_fails_and_old_comes_back(self, serving: Fleet, failure: str) -> None:
        serve = serving.cluster.serve
        (serve.fail_deploy if failure == "deploy" else serve.fail_warm_up).add(NEW.name)
        result = serving.engine.run(SWAP)
        assert result.outcome is Outcome.ROLLED_BACK
        assert result.message.startswith(f"rolled back to {OLD.name}")
        assert _phases(serving)[-1] == SwapPhase.ROLLING_BACK
        assert_one_consistent_state(serving, OLD)
        assert serve.deployed == [NEW_APP.app, OLD_APP.app], "OLD back on its own generation"

    def test_switching_a_registry_failure_is_finished_by_the_restarted_manager(
        self, serving: Fleet
    ) -> None:
        routes = serving.cluster.routes

        def unreachable(alias: str, name: str) -> None:
            raise ConnectionError("registry unreachable")

        set_alias = routes.set_alias
        routes.set_alias = unreachable  # type: ignore[method-assign]
        with pytest.raises(ConnectionError):
            serving.engine.run(SWAP)
        routes.set_alias = set_alias  # type: ignore[method-assign]
        serving.restart()
        assert_one_consistent_state(serving, NEW)

    def test_rolling_back_old_that_cannot_come_back_fails_and_releases_holds(
        self, serving: Fleet
    ) -> None:
        serving.cluster.serve.fail_deploy.update({NEW.name, OLD.name})
        result = serving.engine.run(SWAP)
        assert result.outcome is Outcome.FAILED
        assert f"{OLD.name} could not be brought back" in result.message
        assert serving.cluster.routes.table.held_aliases == frozenset()
        assert serving.cluster.serve.apps == {}


@dataclass(frozen=True)
class Death:
    point: str
    subject: str | None
    survivor: ModelDeploymentConfig
    outcome: Outcome
    redeploys: int
    """Engine starts the restart itself needs (OLD brought back)."""
    new_fails: bool = False


DEATHS = {
    "preflight (journaled)": Death("journaled:preflight", None, OLD, Outcome.ROLLED_BACK, 0),
    "preflight (staging NEW)": Death("staging", NEW.source, OLD, Outcome.ROLLED_BACK, 0),
    "draining (journaled)": Death("journaled:draining", None, OLD, Outcome.ROLLED_BACK, 0),
    "draining (waiting)": Death("drain", OLD.name, OLD, Outcome.ROLLED_BACK, 0),
    "removing_old (journaled)": Death("journaled:removing_old", None, OLD, Outcome.ROLLED_BACK, 0),
    "removing_old (OLD deleted)": Death("wait_freed", None, OLD, Outcome.ROLLED_BACK, 1),
    "deploying_new (journaled)": Death(
        "journaled:deploying_new", None, OLD, Outcome.ROLLED_BACK, 1
    ),
    "deploying_new (NEW starting)": Death("deploy:starting", NEW.name, OLD, Outcome.ROLLED_BACK, 1),
    "deploying_new (NEW warming up)": Death("warm_up", NEW.name, NEW, Outcome.DONE, 0),
    "switching (journaled)": Death("journaled:switching", None, NEW, Outcome.DONE, 0),
    "switching (snapshot written)": Death("snapshot_saved:switching", None, NEW, Outcome.DONE, 0),
    "rolling_back (journaled)": Death(
        "journaled:rolling_back", None, OLD, Outcome.ROLLED_BACK, 1, new_fails=True
    ),
    "rolling_back (OLD redeploying)": Death(
        "deploy:starting", OLD.name, OLD, Outcome.ROLLED_BACK, 1, new_fails=True
    ),
}


@pytest.mark.parametrize("death", DEATHS.values(), ids=DEATHS.keys())
def test_a_manager_dying_in_each_phase_converges_to_one_consistent_state(
    serving: Fleet, death: Death
) -> None:
    if death.new_fails:
        serving.cluster.serve.fail_warm_up.add(NEW.name)
    serving.cluster.arm(death.point, death.subject)
    with pytest.raises(Killed):
        serving.engine.run(SWAP)
    assert serving.journal.unfinished() is not None
    serving.cluster.serve.fail_warm_up.clear()
    starts_before = len(serving.cluster.serve.deployed)

    serving.restart()
    end = [e for e in serving.journal.entries() if e.get("after_restart")][-1]
    assert end["outcome"] == death.outcome, end
    assert_one_consistent_state(serving, death.survivor)
    assert len(serving.cluster.serve.deployed) - starts_before == death.redeploys


def test_every_swap_phase_has_a_death_case() -> None:
    covered = {label.split(" ")[0] for label in DEATHS}
    assert covered == {phase.value for phase in SwapPhase}
