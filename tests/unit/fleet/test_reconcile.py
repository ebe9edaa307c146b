"""What a restarted engine does with each kind of interrupted operation, and how it makes
Serve and the routing table agree with the desired state (in-memory cluster, no Ray).

Swaps interrupted in every phase are in test_swap_flow.py."""

from __future__ import annotations

import pytest

from cluster.fleet.ports import AppStatus
from domain.app_name import AppName
from domain.model_state import ModelState
from domain.operation import OperationDetails, Outcome, SwapStrategy
from domain.operation_request import AddRequest, AliasRequest, RemoveRequest, SwapRequest
from serve_apps.registry.routing_table import RoutingTable
from tests.support.fleet_configs import OLD
from tests.support.memory_cluster import Killed
from tests.unit.fleet.conftest import NEW, Fleet

pytestmark = pytest.mark.unit


def _after_restart(fleet: Fleet) -> dict[str, object]:
    ends = [e for e in fleet.journal.entries() if e.get("after_restart")]
    assert len(ends) == 1, ends
    return ends[0]


def _killed(fleet: Fleet, request: object, point: str, subject: str | None = None) -> None:
    fleet.cluster.arm(point, subject)
    with pytest.raises(Killed):
        fleet.engine.run(request)  # type: ignore[arg-type]


def test_a_clean_start_has_nothing_to_reconcile(fleet: Fleet) -> None:
    assert fleet.engine.reconcile() == "nothing to reconcile"
    fleet.engine.run(AddRequest(config=OLD))
    assert fleet.restart().reconcile() == "nothing to reconcile"


def test_an_interrupted_add_is_undone_and_can_be_run_again(fleet: Fleet) -> None:
    _killed(fleet, AddRequest(config=OLD), "warm_up", OLD.name)
    assert fleet.cluster.serve.apps == {"model-mini-old-g1": AppStatus.RUNNING}
    fleet.restart()
    end = _after_restart(fleet)
    assert end["outcome"] == Outcome.FAILED and "run the add again" in str(end["message"])
    assert fleet.cluster.serve.apps == {}
    assert fleet.cluster.routes.table.live_models() == ()
    assert fleet.engine.fleet().models == {}
    again = fleet.engine.run(AddRequest(config=OLD))
    assert again.outcome is Outcome.DONE
    assert again.details.generation == 2, "the interrupted generation is never reused"


def test_an_add_recorded_before_the_restart_is_kept(fleet: Fleet) -> None:
    fleet.engine.run(AddRequest(config=OLD))
    # The manager died after recording the model, before journaling the end.
    details = OperationDetails(name=OLD.name, generation=1)
    fleet.journal.append(
        {"op_id": "x1", "event": "start", "kind": "add", "details": details.model_dump()}
    )
    fleet.restart()
    assert _after_restart(fleet)["outcome"] == Outcome.DONE
    assert set(fleet.engine.fleet().models) == {OLD.name}
    assert fleet.cluster.serve.apps == {"model-mini-old-g1": AppStatus.RUNNING}


def test_an_interrupted_remove_is_completed(fleet: Fleet) -> None:
    fleet.engine.run(AddRequest(config=OLD))
    _killed(fleet, RemoveRequest(name=OLD.name), "delete", "model-mini-old-g1")
    fleet.restart()
    assert _after_restart(fleet)["outcome"] == Outcome.DONE
    assert fleet.engine.fleet().models == {}
    assert fleet.cluster.serve.apps == {}
    assert fleet.cluster.routes.table.live_models() == ()


def test_an_interrupted_alias_is_completed(fleet: Fleet) -> None:
    fleet.engine.run(AddRequest(config=OLD))
    _killed(fleet, AliasRequest(alias="chat", name=OLD.name), "snapshot_saved:")
    fleet.cluster.routes.table = fleet.cluster.routes.table.with_alias("chat", "elsewhere")
    fleet.restart()
    assert _after_restart(fleet)["outcome"] == Outcome.DONE
    assert fleet.cluster.routes.table.aliases["chat"] == OLD.name


def test_a_swap_whose_old_cannot_come_back_ends_failed_and_says_so(fleet: Fleet) -> None:
    fleet.engine.run(AddRequest(config=OLD))
    bbm = SwapRequest(old=OLD.name, config=NEW, strategy=SwapStrategy.BREAK_BEFORE_MAKE)
    _killed(fleet, bbm, "deploy:starting", NEW.name)
    fleet.cluster.serve.fail_deploy.add(OLD.name)
    fleet.restart()
    end = _after_restart(fleet)
    assert end["outcome"] == Outcome.FAILED
    assert f"{OLD.name} could not be brought back" in str(end["message"])
    assert fleet.cluster.serve.apps == {}
    assert fleet.cluster.routes.table.held_aliases == frozenset()


def test_a_restarted_registry_is_filled_again(fleet: Fleet) -> None:
    fleet.engine.run(AddRequest(config=OLD))
    fleet.cluster.routes.table = RoutingTable()  # the registry actor restarted empty
    fleet.restart()
    table = fleet.cluster.routes.table
    assert table.models[OLD.name].state is ModelState.READY
    assert table.models[OLD.name].app_name == "model-mini-old-g1"
    assert dict(table.aliases) == {"default": OLD.name}


def test_holds_left_by_a_dead_manager_are_released(fleet: Fleet) -> None:
    fleet.engine.run(AddRequest(config=OLD))
    fleet.cluster.routes.hold({"default": None})
    fleet.restart()
    assert fleet.cluster.routes.table.held_aliases == frozenset()


def test_a_model_app_of_no_recorded_generation_is_deleted(fleet: Fleet) -> None:
    fleet.engine.run(AddRequest(config=OLD))
    orphan = AppName(OLD.name, 7).app
    fleet.cluster.serve.apps[orphan] = AppStatus.RUNNING
    fleet.cluster.serve.apps["someone-elses-app"] = AppStatus.RUNNING
    fleet.restart()
    assert set(fleet.cluster.serve.apps) == {"model-mini-old-g1", "someone-elses-app"}


def test_a_model_whose_app_is_down_is_not_published_ready(fleet: Fleet) -> None:
    fleet.engine.run(AddRequest(config=OLD))
    fleet.cluster.routes.table = RoutingTable()
    fleet.cluster.serve.apps["model-mini-old-g1"] = AppStatus.DEPLOYING
    fleet.restart()
    assert OLD.name not in fleet.cluster.routes.table.models
