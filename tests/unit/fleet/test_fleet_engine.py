"""The fleet engine's add, remove, alias and health watch, on an in-memory cluster (no Ray).

Admission and staging decisions are real (a tiny real config.json per staged model); Serve,
the registry and the nodes are tests/support/memory_cluster.py.
"""

from __future__ import annotations

import pytest

from cluster.fleet.ports import AppStatus
from domain.app_name import AppName
from domain.deployment_config import ModelDeploymentConfig
from domain.model_state import ModelState
from domain.operation import OperationKind, OperationResult, Outcome, SwapPhase
from domain.operation_request import AddRequest, AliasRequest, RemoveRequest
from tests.support.fleet_configs import CPU, OLD
from tests.unit.fleet.conftest import NEW, Fleet

pytestmark = pytest.mark.unit


def _add(
    fleet: Fleet, config: ModelDeploymentConfig = OLD, *, dry_run: bool = False
) -> OperationResult:
    return fleet.engine.run(AddRequest(config=config, dry_run=dry_run))


class TestAdd:
    def test_an_admitted_model_is_deployed_warmed_published_and_recorded(
        self, fleet: Fleet
    ) -> None:
        result = _add(fleet)
        assert result.outcome is Outcome.DONE, result.message
        assert result.kind is OperationKind.ADD
        app = AppName(OLD.name, 1)
        assert fleet.cluster.serve.apps == {app.app: AppStatus.RUNNING}
        table = fleet.cluster.routes.table
        route = table.models[OLD.name]
        assert (route.state, route.app_name, route.deployment_name) == (
            ModelState.READY,
            "model-mini-old-g1",
            "model-mini-old-g1:mini-old",
        )
        assert dict(table.aliases) == {"default": OLD.name}
        state = fleet.engine.fleet()
        assert state.models[OLD.name].config == OLD and state.models[OLD.name].generation == 1
        assert state.aliases == {"default": OLD.name}
        assert fleet.journal.load_snapshot() == state
        assert fleet.journal.unfinished() is None
        assert result.details.generation == 1
        assert list(result.phase_seconds) == [SwapPhase.PREFLIGHT, SwapPhase.DEPLOYING_NEW]
        assert fleet.cluster.nodes.staged == [OLD.source], "staged once per operation"
        assert result.details.admission is not None and result.details.admission.admitted

    def test_a_dry_run_reads_the_config_only_and_changes_nothing(self, fleet: Fleet) -> None:
        result = _add(fleet, dry_run=True)
        assert result.outcome is Outcome.DONE
        assert "nothing changed" in result.message
        assert result.details.weights is not None
        assert fleet.cluster.nodes.staged == []
        assert fleet.cluster.serve.apps == {}
        assert fleet.cluster.routes.table.version == 0
        assert fleet.engine.fleet().models == {}

    def test_a_model_that_does_not_fit_is_rejected_with_reasons(self, fleet: Fleet) -> None:
        fleet.cluster.nodes.slot_memory_gib = 0.001
        result = _add(fleet)
        assert result.outcome is Outcome.REJECTED
        assert result.message.startswith("not admitted: ")
        assert result.details.admission is not None
        assert not result.details.admission.admitted
        assert fleet.cluster.serve.deployed == []
        assert fleet.metrics.admissions[-1][0] is False

    def test_a_staging_failure_is_a_rejection(self, fleet: Fleet) -> None:
        fleet.cluster.nodes.staging_error[OLD.source] = OSError("[Errno 28] No space left")
        result = _add(fleet)
        assert result.outcome is Outcome.REJECTED
        assert "No space left" in result.message
        assert fleet.metrics.admissions[-1] == (False, ("staging_failed",))

    def test_a_name_or_alias_clash_is_rejected(self, fleet: Fleet) -> None:
        _add(fleet)
        again = _add(fleet)
        assert again.outcome is Outcome.REJECTED
        assert "already exists" in again.message
        clash = NEW.model_copy(update={"aliases": (OLD.name,)})
        assert "is the name of a model" in _add(fleet, clash).message

    def test_an_engine_that_fails_to_start_leaves_no_model(self, fleet: Fleet) -> None:
        fleet.cluster.serve.fail_deploy.add(OLD.name)
        result = _add(fleet)
        assert result.outcome is Outcome.FAILED
        assert "Engine core initialization failed" in result.message
        assert fleet.cluster.serve.apps == {}
        assert fleet.cluster.routes.table.live_models() == ()
        assert fleet.engine.fleet().models == {}

    def test_a_failed_warm_up_deletes_the_app(self, fleet: Fleet) -> None:
        fleet.cluster.serve.fail_warm_up.add(OLD.name)
        result = _add(fleet)
        assert result.outcome is Outcome.FAILED
        assert "warm-up request failed" in result.message
        assert fleet.cluster.serve.apps == {}

    def test_a_refused_placement_publishes_nothing(self, fleet: Fleet) -> None:
        fleet.cluster.serve.placement_refused.add(OLD.name)
        result = _add(fleet)
        assert result.outcome is Outcome.FAILED
        assert "cannot be placed" in result.message
        assert OLD.name not in fleet.cluster.routes.table.models
        assert fleet.cluster.serve.deployed == []

    def test_a_re_added_name_gets_the_next_generation(self, fleet: Fleet) -> None:
        _add(fleet)
        fleet.engine.run(RemoveRequest(name=OLD.name))
        assert _add(fleet).details.generation == 2
        assert set(fleet.cluster.serve.apps) == {"model-mini-old-g2"}

    def test_the_cluster_decides_what_a_request_leaves_unset(self, fleet: Fleet) -> None:
        request = ModelDeploymentConfig(name="plain", source="miniature:llama")
        assert request.accelerator.kind == "gpu" and not request.engine.enforce_eager
        _add(fleet, request)
        recorded = fleet.engine.fleet().models["plain"].config
        assert recorded.accelerator == CPU
        assert recorded.engine.enforce_eager, "eager on the CPU unless asked otherwise"
        explicit = ModelDeploymentConfig.model_validate(
            {"name": "compiled", "source": "miniature:llama", "engine": {"enforce_eager": False}}
        )
        _add(fleet, explicit)
        assert not fleet.engine.fleet().models["compiled"].config.engine.enforce_eager


class TestRemoveAndAlias:
    def test_remove_deletes_the_app_and_leaves_a_tombstone(self, fleet: Fleet) -> None:
        _add(fleet)
        result = fleet.engine.run(RemoveRequest(name=OLD.name))
        assert result.outcome is Outcome.DONE
        assert fleet.cluster.serve.apps == {}
        assert fleet.cluster.routes.table.models[OLD.name].state is ModelState.REMOVED
        assert dict(fleet.cluster.routes.table.aliases) == {}
        assert fleet.engine.fleet().models == {} and fleet.engine.fleet().aliases == {}

    def test_remove_of_an_unknown_model_is_rejected(self, fleet: Fleet) -> None:
        result = fleet.engine.run(RemoveRequest(name="ghost"))
        assert result.outcome is Outcome.REJECTED
        assert "no model named 'ghost'" in result.message

    def test_an_alias_points_at_a_model(self, fleet: Fleet) -> None:
        _add(fleet)
        result = fleet.engine.run(AliasRequest(alias="chat", name=OLD.name))
        assert result.outcome is Outcome.DONE
        assert fleet.cluster.routes.table.aliases["chat"] == OLD.name
        assert fleet.engine.fleet().aliases == {"default": OLD.name, "chat": OLD.name}

    def test_an_alias_to_nothing_or_named_like_a_model_is_rejected(self, fleet: Fleet) -> None:
        _add(fleet)
        assert fleet.engine.run(AliasRequest(alias="x", name="ghost")).outcome is Outcome.REJECTED
        named = fleet.engine.run(AliasRequest(alias=OLD.name, name=OLD.name))
        assert named.outcome is Outcome.REJECTED and "is a model name" in named.message


class TestOneChangeAtATime:
    def test_a_change_while_another_runs_is_refused_and_names_it(self, fleet: Fleet) -> None:
        fleet.engine._lock.acquire()
        try:
            result = _add(fleet)
        finally:
            fleet.engine._lock.release()
        assert result.outcome is Outcome.REJECTED
        assert "another change is running" in result.message
        assert fleet.metrics.operations[-1][1] == "rejected"


class TestHealth:
    def test_lost_replicas_make_a_model_degraded_then_ready_once_re_placed(
        self, fleet: Fleet
    ) -> None:
        _add(fleet)
        app = AppName(OLD.name, 1).app
        assert fleet.engine.check_health() == []
        fleet.cluster.serve.apps[app] = AppStatus.UNHEALTHY  # its node is gone
        (change,) = fleet.engine.check_health()
        assert change.state is ModelState.DEGRADED
        route = fleet.cluster.routes.table.models[OLD.name]
        assert route.state is ModelState.DEGRADED
        assert route.error and "re-placing it when capacity allows" in route.error
        assert fleet.engine.check_health() == [], "reported once, not on every pass"
        fleet.cluster.serve.apps[app] = AppStatus.RUNNING
        (change,) = fleet.engine.check_health()
        assert change.state is ModelState.READY
        health = [e for e in fleet.journal.entries() if e.get("event") == "health"]
        assert [e["state"] for e in health] == ["degraded", "ready"]

    def test_a_registry_that_lost_its_table_is_rebuilt_whole_then_opened(
        self, fleet: Fleet
    ) -> None:
        _add(fleet)
        routes = fleet.cluster.routes
        kept = routes.table
        routes.lose_state()
        fleet.engine.check_health()
        assert routes.is_open()
        assert routes.table.epoch != kept.epoch, "a new epoch: gateways take it as real"
        assert routes.table.models == kept.models
        assert routes.table.aliases == kept.aliases
        rebuilt = [e for e in fleet.journal.entries() if e.get("event") == "registry_rebuilt"]
        assert len(rebuilt) == 1
        fleet.engine.check_health()
        assert (
            len([e for e in fleet.journal.entries() if e.get("event") == "registry_rebuilt"]) == 1
        )

    def test_the_health_watch_skips_while_an_operation_runs(self, fleet: Fleet) -> None:
        _add(fleet)
        fleet.cluster.serve.apps.clear()
        with fleet.engine._lock:
            assert fleet.engine.check_health() == []


class TestStartupSteps:
    def test_every_start_reports_where_its_time_went(self, fleet: Fleet) -> None:
        result = _add(fleet)
        steps = result.details.startup_steps
        assert steps is not None
        assert list(steps) == [
            "scheduling",
            "replica_process",
            "engine_start",
            "weight_load",
            "kv_cache",
            "compile",
            "replica_ready",
            "warm_up",
        ]
        assert steps["scheduling"] == pytest.approx(fleet.cluster.serve.start_s)
        assert steps["weight_load"] is None, "nothing reported it: not guessed"
        assert any(e.message.startswith(f"{OLD.name} started in ") for e in result.events)
        assert fleet.metrics.startups == [steps]
