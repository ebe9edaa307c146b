"""A hot swap, phase by phase and by strategy: each phase succeeding, failing, and the
manager dying there, for break-before-make and make-before-break, and how `auto` chooses.

After a death, a restarted engine must converge to exactly one consistent state every
time: one model serving `default`, recorded with its own config, the other gone from Serve
and the routing table, nothing held, the journal closed. In-memory cluster, no Ray.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from cluster.fleet.ports import AppStatus
from domain.app_name import AppName
from domain.deployment_config import ModelDeploymentConfig
from domain.model_state import ModelState
from domain.operation import Outcome, SwapPhase, SwapStrategy
from domain.operation_request import AddRequest, SwapRequest
from tests.support.fleet_configs import OLD
from tests.support.memory_cluster import Killed
from tests.unit.fleet.conftest import NEW, Fleet

pytestmark = pytest.mark.unit

OLD_APP = AppName(OLD.name, 1)
NEW_APP = AppName(NEW.name, 1)
MBB, BBM = SwapStrategy.MAKE_BEFORE_BREAK, SwapStrategy.BREAK_BEFORE_MAKE
SWAP = SwapRequest(old=OLD.name, config=NEW, strategy=BBM)
"""Break-before-make, asked for (the in-memory node has room for both models)."""
MBB_SWAP = SwapRequest(old=OLD.name, config=NEW)
"""`auto`, which picks make-before-break there."""
LATE_DEPLOY = SwapRequest(old=OLD.name, config=NEW, strategy=BBM, deploy_early=False)
"""Break-before-make that deploys NEW only once OLD's accelerators are seen free."""


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


class TestTheStrategyChoice:
    def test_auto_makes_before_breaking_when_new_fits_beside_old(self, serving: Fleet) -> None:
        result = serving.engine.run(MBB_SWAP)
        assert result.outcome is Outcome.DONE, result.message
        assert result.strategy is MBB and result.details.strategy is MBB
        assert result.strategy_reason == "NEW fits on accelerators free while OLD runs"
        assert serving.metrics.started[-1][2] is not None
        assert serving.metrics.started[-1][2].strategy == MBB

    def test_auto_breaks_before_making_when_new_needs_olds_accelerators(
        self, serving: Fleet
    ) -> None:
        serving.cluster.nodes.slots = 1
        result = serving.engine.run(MBB_SWAP)
        assert result.outcome is Outcome.DONE, result.message
        assert result.strategy is BBM
        assert (
            result.strategy_reason and "takes the accelerators OLD frees" in result.strategy_reason
        )
        assert _phases(serving)[1] == SwapPhase.DRAINING

    def test_make_before_break_asked_for_that_does_not_fit_changes_nothing(
        self, serving: Fleet
    ) -> None:
        serving.cluster.nodes.slots = 1
        version = serving.cluster.routes.table.version
        result = serving.engine.run(SwapRequest(old=OLD.name, config=NEW, strategy=MBB))
        assert result.outcome is Outcome.REJECTED
        assert result.message.startswith("not admitted (make-before-break), nothing changed")
        assert result.outcome.exit_code == 1
        assert serving.cluster.routes.table.version == version
        assert_one_consistent_state(serving, OLD)

    def test_the_resolved_strategy_is_journaled_before_anything_acts(self, serving: Fleet) -> None:
        serving.cluster.arm("journaled:deploying_new")
        with pytest.raises(Killed):
            serving.engine.run(MBB_SWAP)
        unfinished = serving.journal.unfinished()
        assert unfinished is not None
        assert unfinished["details"]["strategy"] == "make-before-break"


class TestAliasUnavailability:
    def test_make_before_break_leaves_no_alias_without_a_model(self, serving: Fleet) -> None:
        result = serving.engine.run(MBB_SWAP)
        assert result.details.alias_unavailable_s == {"default": 0.0}
        ((subject, seconds),) = serving.metrics.unavailable
        assert (subject.strategy, seconds) == (MBB, {"default": 0.0})
        last = serving.engine.last_swap()
        assert last is not None
        assert (last.old, last.new, last.strategy) == (OLD.name, NEW.name, MBB)
        assert last.alias_unavailable_s == {"default": 0.0}

    def test_break_before_make_counts_the_hold_from_the_drain_to_the_switch(
        self, serving: Fleet
    ) -> None:
        serving.cluster.routes.in_flight_by_model[OLD.name] = 1  # the drain waits it out
        result = serving.engine.run(SWAP)
        unavailable = result.details.alias_unavailable_s
        assert unavailable is not None
        assert unavailable["default"] == pytest.approx(serving.settings.drain_timeout_s)

    def test_a_rollback_counts_until_old_serves_again(self, serving: Fleet) -> None:
        serving.cluster.serve.fail_deploy.add(NEW.name)
        result = serving.engine.run(SWAP)
        assert result.outcome is Outcome.ROLLED_BACK
        assert result.details.alias_unavailable_s is not None
        assert set(result.details.alias_unavailable_s) == {"default"}

    def test_a_dry_run_or_refused_swap_is_no_last_swap(self, serving: Fleet) -> None:
        serving.engine.run(SwapRequest(old=OLD.name, config=NEW, dry_run=True))
        serving.engine.run(SwapRequest(old="ghost", config=NEW))
        assert serving.engine.last_swap() is None


class TestPredictedHolds:
    def test_every_start_is_timed_and_recorded(self, serving: Fleet) -> None:
        assert serving.engine.fleet().startup_of(OLD) is not None

    def test_a_hold_predicted_past_the_gateways_bound_warns_and_is_published(
        self, serving: Fleet
    ) -> None:
        # NEW's last start (same source and layout) took 900 s; the gateways hold 600 s.
        state = serving.engine.fleet()
        serving.engine._ctx.desired.update(state.with_startup(NEW, 900.0))
        published: list[float | None] = []
        routes = serving.cluster.routes
        hold = routes.hold

        def watching(holds: Mapping[str, float | None]) -> None:
            published.extend(holds.values())
            hold(holds)

        routes.hold = watching  # type: ignore[method-assign]
        result = serving.engine.run(SWAP)
        warnings = [e.message for e in result.events if e.message.startswith("warning:")]
        assert len(warnings) == 1 and "about 900 s" in warnings[0], warnings
        assert "503 + Retry-After" in warnings[0]
        (ends_at,) = [e for e in published if e is not None]
        assert ends_at - time.time() == pytest.approx(900.0, abs=30)

    def test_make_before_break_predicts_no_hold(self, serving: Fleet) -> None:
        state = serving.engine.fleet()
        serving.engine._ctx.desired.update(state.with_startup(NEW, 900.0))
        result = serving.engine.run(MBB_SWAP)
        assert not [e for e in result.events if e.message.startswith("warning:")]


class TestMakeBeforeBreak:
    def test_new_starts_beside_old_and_nothing_is_ever_held(self, serving: Fleet) -> None:
        seen: list[tuple[frozenset[str], str]] = []
        serve = serving.cluster.serve
        start_deploy = serve.start_deploy

        def watching_deploy(*args, **kwargs):
            table = serving.cluster.routes.table
            seen.append((table.held_aliases, table.aliases["default"]))
            return start_deploy(*args, **kwargs)

        serve.start_deploy = watching_deploy  # type: ignore[method-assign]
        result = serving.engine.run(MBB_SWAP)
        assert result.outcome is Outcome.DONE, result.message
        assert seen == [(frozenset(), OLD.name)], "OLD served `default` while NEW started"
        assert _phases(serving) == [
            SwapPhase.PREFLIGHT,
            SwapPhase.DEPLOYING_NEW,
            SwapPhase.SWITCHING,
            SwapPhase.DRAINING,
            SwapPhase.REMOVING_OLD,
        ]
        assert "nothing held" in result.message
        assert_one_consistent_state(serving, NEW)
        tomb = serving.cluster.routes.table.models[OLD.name]
        assert (tomb.state, tomb.replaced_by) == (ModelState.REMOVED, NEW.name)

    def test_the_aliases_move_in_one_routing_table_version(self, serving: Fleet) -> None:
        versions: list[int] = []
        routes = serving.cluster.routes
        switch = routes.switch

        def watching_switch(*args, **kwargs):
            versions.append(routes.table.version)
            switch(*args, **kwargs)
            versions.append(routes.table.version)

        routes.switch = watching_switch  # type: ignore[method-assign]
        serving.engine.run(MBB_SWAP)
        assert versions[1] == versions[0] + 1

    def test_old_is_drained_after_the_switch(self, serving: Fleet) -> None:
        serving.cluster.routes.in_flight_by_model[OLD.name] = 2
        result = serving.engine.run(MBB_SWAP)
        assert any("2 requests still in flight" in e.message for e in result.events)
        assert_one_consistent_state(serving, NEW)

    @pytest.mark.parametrize("failure", ["deploy", "warm_up"])
    def test_a_new_that_fails_leaves_old_serving_untouched(
        self, serving: Fleet, failure: str
    ) -> None:
        serve = serving.cluster.serve
        (serve.fail_deploy if failure == "deploy" else serve.fail_warm_up).add(NEW.name)
        old_route = serving.cluster.routes.table.models[OLD.name]
        result = serving.engine.run(MBB_SWAP)
        assert result.outcome is Outcome.ROLLED_BACK
        assert result.outcome.exit_code == 1
        assert "injected" in result.message and "kept serving, untouched" in result.message
        assert serving.cluster.routes.table.models[OLD.name] == old_route
        assert serve.deployed == [NEW_APP.app], "OLD was never redeployed"
        assert_one_consistent_state(serving, OLD)


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
        start_deploy = serve.start_deploy

        def watching_deploy(*args, **kwargs):
            held_during.append(serving.cluster.routes.table.held_aliases)
            return start_deploy(*args, **kwargs)

        serve.start_deploy = watching_deploy  # type: ignore[method-assign]
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
        result = serving.engine.run(LATE_DEPLOY)
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

        def unreachable(*args: object) -> None:
            raise ConnectionError("registry unreachable")

        switch = routes.switch
        routes.switch = unreachable  # type: ignore[method-assign,assignment]
        with pytest.raises(ConnectionError):
            serving.engine.run(SWAP)
        routes.switch = switch  # type: ignore[method-assign]
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
    request: SwapRequest = SWAP


DEATHS = {
    "preflight (journaled)": Death("journaled:preflight", None, OLD, Outcome.ROLLED_BACK, 0),
    "preflight (staging NEW)": Death("staging", NEW.source, OLD, Outcome.ROLLED_BACK, 0),
    "draining (journaled)": Death("journaled:draining", None, OLD, Outcome.ROLLED_BACK, 0),
    "draining (waiting)": Death("drain", OLD.name, OLD, Outcome.ROLLED_BACK, 0),
    "removing_old (journaled)": Death("journaled:removing_old", None, OLD, Outcome.ROLLED_BACK, 0),
    "removing_old (NEW deployed early)": Death(
        "deploy:before", NEW.name, OLD, Outcome.ROLLED_BACK, 0
    ),
    "removing_old (OLD deleted, NEW waiting)": Death(
        "deleted", OLD_APP.app, OLD, Outcome.ROLLED_BACK, 1
    ),
    "removing_old (OLD deleted, deployed late)": Death(
        "wait_freed", None, OLD, Outcome.ROLLED_BACK, 1, request=LATE_DEPLOY
    ),
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

MBB_DEATHS = {
    "preflight (journaled)": Death("journaled:preflight", None, OLD, Outcome.ROLLED_BACK, 0),
    "preflight (staging NEW)": Death("staging", NEW.source, OLD, Outcome.ROLLED_BACK, 0),
    "deploying_new (journaled)": Death(
        "journaled:deploying_new", None, OLD, Outcome.ROLLED_BACK, 0
    ),
    "deploying_new (NEW starting)": Death("deploy:starting", NEW.name, OLD, Outcome.ROLLED_BACK, 0),
    "deploying_new (NEW warming up)": Death("warm_up", NEW.name, OLD, Outcome.ROLLED_BACK, 0),
    "switching (journaled)": Death("journaled:switching", None, NEW, Outcome.DONE, 0),
    "switching (aliases moved)": Death("switched", NEW.name, NEW, Outcome.DONE, 0),
    "switching (snapshot written)": Death("snapshot_saved:switching", None, NEW, Outcome.DONE, 0),
    "draining (journaled)": Death("journaled:draining", None, NEW, Outcome.DONE, 0),
    "draining (waiting)": Death("drain", OLD.name, NEW, Outcome.DONE, 0),
    "removing_old (journaled)": Death("journaled:removing_old", None, NEW, Outcome.DONE, 0),
    "removing_old (deleting OLD)": Death("delete", OLD_APP.app, NEW, Outcome.DONE, 0),
}


@pytest.mark.parametrize("death", MBB_DEATHS.values(), ids=MBB_DEATHS.keys())
def test_a_manager_dying_in_each_make_before_break_phase_converges(
    serving: Fleet, death: Death
) -> None:
    serving.cluster.arm(death.point, death.subject)
    with pytest.raises(Killed):
        serving.engine.run(MBB_SWAP)
    starts_before = len(serving.cluster.serve.deployed)
    serving.restart()
    end = [e for e in serving.journal.entries() if e.get("after_restart")][-1]
    assert end["outcome"] == death.outcome, end
    assert_one_consistent_state(serving, death.survivor)
    assert len(serving.cluster.serve.deployed) - starts_before == death.redeploys


@pytest.mark.parametrize("death", DEATHS.values(), ids=DEATHS.keys())
def test_a_manager_dying_in_each_break_before_make_phase_converges(
    serving: Fleet, death: Death
) -> None:
    if death.new_fails:
        serving.cluster.serve.fail_warm_up.add(NEW.name)
    serving.cluster.arm(death.point, death.subject)
    with pytest.raises(Killed):
        serving.engine.run(death.request)
    assert serving.journal.unfinished() is not None
    serving.cluster.serve.fail_warm_up.clear()
    starts_before = len(serving.cluster.serve.deployed)

    serving.restart()
    end = [e for e in serving.journal.entries() if e.get("after_restart")][-1]
    assert end["outcome"] == death.outcome, end
    assert_one_consistent_state(serving, death.survivor)
    assert len(serving.cluster.serve.deployed) - starts_before == death.redeploys


def test_every_swap_phase_has_a_death_case_for_each_strategy() -> None:
    # `sleeping` and `waking` are a park's and a wake's only (tests/unit/fleet/test_residency.py)
    swap_phases = {phase.value for phase in SwapPhase} - {"sleeping", "waking"}
    assert {label.split(" ")[0] for label in DEATHS} == swap_phases
    no_rollback = swap_phases - {SwapPhase.ROLLING_BACK.value}
    assert {label.split(" ")[0] for label in MBB_DEATHS} == no_rollback
