"""Parking and waking a model (cluster/fleet/residency.py), on the in-memory cluster: a
parked model frees its accelerators and keeps its name, aliases and routes; a wake brings
it back under the next generation, or changes nothing; a restart at any point of either
converges to one consistent state."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from cluster.fleet.ports import AppStatus
from cluster.fleet.preflight import park_mode_refusals
from cluster.fleet.wake_on_request import WakeOnRequest
from domain.deployment_config import ModelDeploymentConfig
from domain.fleet_file import FleetFile, FleetModelEntry
from domain.model_state import ModelState
from domain.operation import Outcome, SwapPhase
from domain.operation_request import (
    AddRequest,
    ParkRequest,
    RemoveRequest,
    ResidencyRequest,
    WakeRequest,
    WakeTrigger,
)
from domain.residency import ParkMode
from policies.inventory import ClusterInventory
from serve_apps.registry.routing_table import Forward, Hold, ModelRoute
from switchyard.fleet_file_report import plan_lines
from tests.support.fleet_configs import OLD
from tests.support.memory_cluster import Killed
from tests.unit.fleet.conftest import NEW, Fleet

pytestmark = pytest.mark.unit

G1, G2 = "model-mini-old-g1", "model-mini-old-g2"


@pytest.fixture
def parked(fleet: Fleet) -> Fleet:
    assert fleet.engine.run(AddRequest(config=OLD)).outcome is Outcome.DONE
    assert fleet.engine.run(ParkRequest(name=OLD.name)).outcome is Outcome.DONE
    return fleet


def test_a_parked_model_frees_its_accelerators_and_keeps_its_name_aliases_and_route(
    parked: Fleet,
) -> None:
    cluster = parked.cluster
    assert cluster.serve.apps == {}, "its engine is unloaded"
    assert cluster.serve.slots_per_app == {}
    table = cluster.routes.table
    assert [r.name for r in table.live_models()] == [OLD.name], "/v1/models still lists it"
    assert table.models[OLD.name].state is ModelState.PARKED
    assert table.aliases["default"] == OLD.name
    for requested in (OLD.name, "default"):
        held = table.resolve(requested)
        assert isinstance(held, Hold) and held.wake is not None
        # Its predicted wake is its last start (3 s on the in-memory cluster).
        assert held.predicted_s == table.models[OLD.name].wake_s == 3.0
    model = parked.engine.fleet().models[OLD.name]
    assert model.parked and model.config == parked.engine.fleet().models[OLD.name].config
    # Its weights stay pinned: the sources a release keeps include the parked model's.
    assert cluster.nodes.released[-1] == frozenset({OLD.source})


def test_a_park_drains_before_it_unloads(parked: Fleet) -> None:
    phases = [e["phase"] for e in parked.journal.entries() if e.get("event") == "phase"]
    assert phases[-2:] == [SwapPhase.DRAINING, SwapPhase.REMOVING_OLD]


def test_parking_twice_changes_nothing_and_an_unknown_model_is_refused(parked: Fleet) -> None:
    again = parked.engine.run(ParkRequest(name=OLD.name))
    assert again.outcome is Outcome.DONE and "already parked" in again.message
    unknown = parked.engine.run(ParkRequest(name="nobody"))
    assert unknown.outcome is Outcome.REJECTED and "no model named 'nobody'" in unknown.message
    assert parked.engine.run(WakeRequest(name="nobody")).outcome is Outcome.REJECTED


def test_a_wake_serves_the_model_again_under_its_next_generation(parked: Fleet) -> None:
    result = parked.engine.run(WakeRequest(name=OLD.name))
    assert result.outcome is Outcome.DONE, result.message
    assert result.details.generation == 2
    assert parked.cluster.serve.apps == {G2: AppStatus.RUNNING}
    table = parked.cluster.routes.table
    resolved = table.resolve("default")
    assert isinstance(resolved, Forward) and resolved.route.app_name == G2
    model = parked.engine.fleet().models[OLD.name]
    assert not model.parked and model.generation == 2
    assert model.last_wake_s is not None
    # Its prediction (the last start) is exported beside what the cold start took.
    ((name, path, predicted, measured),) = parked.metrics.wake_predictions
    assert (name, path) == (OLD.name, "cold_start") and predicted > 0 and measured >= 0
    assert parked.engine.run(WakeRequest(name=OLD.name)).message.endswith("nothing changed")


def test_a_wake_that_does_not_fit_is_refused_and_the_model_stays_parked(parked: Fleet) -> None:
    parked.cluster.nodes.slots = 1
    assert parked.engine.run(AddRequest(config=NEW)).outcome is Outcome.DONE
    result = parked.engine.run(WakeRequest(name=OLD.name))
    assert result.outcome is Outcome.REJECTED and "stays parked" in result.message
    assert set(parked.cluster.serve.apps) == {"model-mini-new-g1"}
    route = parked.cluster.routes.table.models[OLD.name]
    assert route.state is ModelState.PARKED
    # Gateways holding requests for it answer them at once, with the reason.
    assert route.wakes_ended == 1 and route.error_code == "capacity_busy"
    assert "not admitted" in (route.error or "")
    assert parked.engine.fleet().models[OLD.name].parked


def test_a_wake_whose_engine_fails_leaves_the_model_parked_with_the_error(parked: Fleet) -> None:
    parked.cluster.serve.fail_deploy.add(OLD.name)
    result = parked.engine.run(WakeRequest(name=OLD.name))
    assert result.outcome is Outcome.FAILED and "stays parked" in result.message
    route = parked.cluster.routes.table.models[OLD.name]
    assert route.state is ModelState.PARKED and "injected" in (route.error or "")
    assert route.wakes_ended == 1 and route.error_code is None
    assert parked.cluster.serve.apps == {}
    parked.cluster.serve.fail_deploy.clear()
    assert parked.engine.run(WakeRequest(name=OLD.name)).outcome is Outcome.DONE


def test_the_health_watch_leaves_a_parked_model_alone(parked: Fleet) -> None:
    assert parked.engine.check_health() == []
    assert parked.cluster.routes.table.models[OLD.name].state is ModelState.PARKED


def test_a_parked_model_survives_a_restart_parked(parked: Fleet) -> None:
    parked.cluster.routes.table = parked.cluster.routes.table.without_model(OLD.name)
    parked.restart()
    assert parked.cluster.routes.table.models[OLD.name].state is ModelState.PARKED
    assert parked.cluster.serve.apps == {}
    assert parked.engine.fleet().models[OLD.name].parked


def test_a_parked_model_can_be_removed_and_its_weights_released(parked: Fleet) -> None:
    assert parked.engine.run(RemoveRequest(name=OLD.name)).outcome is Outcome.DONE
    assert parked.engine.fleet().models == {}
    assert parked.cluster.nodes.released[-1] == frozenset()


def test_other_models_are_admitted_on_the_accelerators_a_park_freed(fleet: Fleet) -> None:
    fleet.cluster.nodes.slots = 1
    fleet.engine.run(AddRequest(config=OLD))
    assert fleet.engine.run(AddRequest(config=NEW)).outcome is Outcome.REJECTED
    fleet.engine.run(ParkRequest(name=OLD.name))
    assert fleet.engine.run(AddRequest(config=NEW)).outcome is Outcome.DONE
    woken = fleet.engine.run(WakeRequest(name=OLD.name))
    assert woken.outcome is Outcome.REJECTED, "NEW holds the only accelerator now"


@dataclass(frozen=True)
class Restart:
    label: str
    request: ParkRequest | WakeRequest
    point: str
    subject: str | None
    outcome: Outcome
    parked: bool
    """Whether the model is parked once the restarted manager has reconciled."""


RESTARTS = [
    Restart(
        "park: draining", ParkRequest(name=OLD.name), "drain", None, Outcome.ROLLED_BACK, False
    ),
    Restart("park: unloading", ParkRequest(name=OLD.name), "delete", G1, Outcome.DONE, True),
    Restart("park: unloaded", ParkRequest(name=OLD.name), "deleted", G1, Outcome.DONE, True),
    Restart(
        "park: recorded",
        ParkRequest(name=OLD.name),
        "snapshot_saved:removing_old",
        None,
        Outcome.DONE,
        True,
    ),
    Restart(
        "wake: generation saved, nothing deployed",
        WakeRequest(name=OLD.name),
        "snapshot_saved:deploying_new",
        None,
        Outcome.FAILED,
        True,
    ),
    Restart("wake: preflight", WakeRequest(name=OLD.name), "staging", None, Outcome.FAILED, True),
    Restart(
        "wake: engine starting",
        WakeRequest(name=OLD.name),
        "deploy:starting",
        OLD.name,
        Outcome.FAILED,
        True,
    ),
    Restart(
        "wake: warming up", WakeRequest(name=OLD.name), "warm_up", OLD.name, Outcome.DONE, False
    ),
]


@pytest.mark.parametrize("case", RESTARTS, ids=[c.label for c in RESTARTS])
def test_a_manager_killed_mid_park_or_wake_converges(fleet: Fleet, case: Restart) -> None:
    fleet.engine.run(AddRequest(config=OLD))
    if isinstance(case.request, WakeRequest):
        fleet.engine.run(ParkRequest(name=OLD.name))
    fleet.cluster.arm(case.point, case.subject)
    with pytest.raises(Killed):
        fleet.engine.run(case.request)
    fleet.restart()
    ends = [e for e in fleet.journal.entries() if e.get("after_restart")]
    assert [e["outcome"] for e in ends] == [case.outcome.value], ends
    model = fleet.engine.fleet().models[OLD.name]
    assert model.parked is case.parked
    route = fleet.cluster.routes.table.models[OLD.name]
    apps = fleet.cluster.serve.apps
    if case.parked:
        assert route.state is ModelState.PARKED and apps == {}
    else:
        assert route.state is ModelState.READY
        assert apps == {model.app.app: AppStatus.RUNNING}
        assert route.app_name == model.app.app
    assert fleet.cluster.routes.table.aliases["default"] == OLD.name


def test_a_wake_publishes_when_it_expects_to_serve(parked: Fleet) -> None:
    seen: list[ModelRoute] = []
    put_route = parked.cluster.routes.put_route

    def record(route: ModelRoute) -> None:
        seen.append(route)
        put_route(route)

    parked.cluster.routes.put_route = record  # type: ignore[method-assign]
    parked.engine.run(WakeRequest(name=OLD.name))
    waking = [r for r in seen if r.state is ModelState.WAKING]
    assert len(waking) == 1 and waking[0].ready_by is not None


def test_requests_wake_a_parked_model_once_however_many_ask(parked: Fleet) -> None:
    started: list[str] = []
    wakes = WakeOnRequest(parked.engine, parked.cluster.routes, spawn=lambda work: work())
    parked.cluster.routes.wakes_wanted.extend([OLD.name, OLD.name, "nobody"])
    started = wakes.serve_once(0)
    assert started == [OLD.name]
    model = parked.engine.fleet().models[OLD.name]
    assert not model.parked and model.generation == 2
    wake = [e for e in parked.journal.entries() if e.get("kind") == "wake"]
    assert len(wake) == 1
    # A serving model asked for again is left alone.
    parked.cluster.routes.wakes_wanted.append(OLD.name)
    assert wakes.serve_once(0) == []


def test_a_wake_under_way_is_not_started_twice(parked: Fleet) -> None:
    queued: list[object] = []
    wakes = WakeOnRequest(parked.engine, parked.cluster.routes, spawn=queued.append)
    parked.cluster.routes.wakes_wanted.append(OLD.name)
    assert wakes.serve_once(0) == [OLD.name]
    parked.cluster.routes.wakes_wanted.append(OLD.name)
    assert wakes.serve_once(0) == [], "its first wake has not finished"
    assert len(queued) == 1


# ---------------------------------------------------------------- on demand: idle and room

ON_DEMAND = {"residency": "on_demand", "min_resident_s": 60, "park_after_idle_s": 600}


def _entry(config: ModelDeploymentConfig, **keys: object) -> FleetModelEntry:
    return FleetModelEntry.model_validate({**FleetModelEntry.of_config(config).written(), **keys})


def _add(fleet: Fleet, config: ModelDeploymentConfig, **keys: object) -> None:
    result = fleet.engine.run(AddRequest(config=config, entry=_entry(config, **keys)))
    assert result.outcome is Outcome.DONE, result.message


def test_an_idle_on_demand_model_is_parked_and_an_always_model_never(fleet: Fleet) -> None:
    _add(fleet, OLD, **ON_DEMAND)
    _add(fleet, NEW)
    fleet.clock.now += 1000  # both resident long enough
    fleet.cluster.routes.idle_s = {OLD.name: 601, NEW.name: 9000}
    parked = fleet.engine.park_idle()
    assert [r.details.name for r in parked] == [OLD.name]
    assert fleet.engine.fleet().models[OLD.name].parked
    assert not fleet.engine.fleet().models[NEW.name].parked
    assert fleet.metrics.parks == [(OLD.name, "idle")]
    # Parked when idle, its next request is held and wakes it.
    assert isinstance(fleet.cluster.routes.table.resolve("default"), Hold)
    assert fleet.engine.park_idle() == []


def _crowded(fleet: Fleet, new_keys: dict[str, object]) -> None:
    """One accelerator: OLD (on demand) parked, NEW on it."""
    fleet.cluster.nodes.slots = 1
    _add(fleet, OLD, **ON_DEMAND)
    assert fleet.engine.run(ParkRequest(name=OLD.name)).outcome is Outcome.DONE
    _add(fleet, NEW, **new_keys)


def test_a_wake_parks_the_least_recently_used_on_demand_model_to_make_room(fleet: Fleet) -> None:
    _crowded(fleet, ON_DEMAND)
    fleet.clock.now += 100  # NEW has been resident past its min_resident_s
    result = fleet.engine.run(WakeRequest(name=OLD.name, trigger=WakeTrigger.REQUEST))
    assert result.outcome is Outcome.DONE, result.message
    models = fleet.engine.fleet().models
    assert not models[OLD.name].parked and models[NEW.name].parked
    assert set(fleet.cluster.serve.apps) == {G2}
    # NEW's requests are held for its own next wake, not refused.
    assert isinstance(fleet.cluster.routes.table.resolve(NEW.name), Hold)
    assert fleet.metrics.parks == [(OLD.name, "manual"), (NEW.name, "evicted")]
    assert result.details.evicted == [NEW.name]
    journaled = [e for e in fleet.journal.entries() if e.get("event") == "details"]
    assert journaled[-1]["details"] == {"evicted": [NEW.name]}, "journaled before it parks"
    ((model, mode, trigger, outcome, seconds),) = fleet.metrics.wakes
    assert (model, mode, trigger, outcome) == (OLD.name, "unload", "request", "done")
    assert seconds is not None


@pytest.mark.parametrize(
    ("keys", "why"),
    [({}, "an always model"), (ON_DEMAND, "resident for less than its min_resident_s")],
)
def test_no_room_means_capacity_busy_and_nothing_parked(
    fleet: Fleet, keys: dict[str, object], why: str
) -> None:
    _crowded(fleet, keys)
    fleet.clock.now += 10  # not past NEW's min_resident_s (60 s)
    result = fleet.engine.run(WakeRequest(name=OLD.name, trigger=WakeTrigger.REQUEST))
    assert result.outcome is Outcome.REJECTED, why
    assert not fleet.engine.fleet().models[NEW.name].parked, why
    route = fleet.cluster.routes.table.models[OLD.name]
    assert route.error_code == "capacity_busy" and route.wakes_ended == 1
    assert "no on-demand model can be parked" in (route.error or "")
    assert fleet.metrics.wakes[-1][3] == "rejected"


def test_a_manager_killed_while_making_room_leaves_the_evicted_model_parked(
    fleet: Fleet,
) -> None:
    _crowded(fleet, ON_DEMAND)
    fleet.clock.now += 100
    fleet.cluster.arm("deleted", "model-mini-new-g1")
    with pytest.raises(Killed):
        fleet.engine.run(WakeRequest(name=OLD.name))
    fleet.restart()
    models = fleet.engine.fleet().models
    assert models[OLD.name].parked and models[NEW.name].parked
    assert fleet.cluster.serve.apps == {}
    for name in (OLD.name, NEW.name):
        assert fleet.cluster.routes.table.models[name].state is ModelState.PARKED


def test_a_residency_change_is_recorded_without_a_redeploy(fleet: Fleet) -> None:
    _add(fleet, OLD)
    entry = _entry(OLD, **ON_DEMAND)
    result = fleet.engine.run(ResidencyRequest(name=OLD.name, entry=entry))
    assert result.outcome is Outcome.DONE, result.message
    assert fleet.engine.fleet().models[OLD.name].requested.residency.value == "on_demand"
    assert fleet.cluster.serve.deployed == ["model-mini-old-g1"], "no redeploy"
    other = _entry(OLD.model_copy(update={"replicas": 2}), **ON_DEMAND)
    refused = fleet.engine.run(ResidencyRequest(name=OLD.name, entry=other))
    assert refused.outcome is Outcome.REJECTED and "that is a swap" in refused.message


def test_an_on_demand_model_that_fits_once_the_others_park_is_added_parked(fleet: Fleet) -> None:
    fleet.cluster.nodes.slots = 1
    _add(fleet, OLD, **ON_DEMAND)
    # `layout: auto`: the layout too is chosen as if the others were parked.
    written = _entry(NEW, **ON_DEMAND).written()
    del written["layout"]
    entry = FleetModelEntry.model_validate(written)
    assert entry.auto_layout
    dry = fleet.engine.run(AddRequest(config=entry.deployment(), entry=entry, dry_run=True))
    assert dry.outcome is Outcome.DONE and "parked" in dry.message
    result = fleet.engine.run(AddRequest(config=entry.deployment(), entry=entry))
    assert result.outcome is Outcome.DONE and "added parked" in result.message
    assert OLD.name in result.message, "it names who holds the accelerators"
    models = fleet.engine.fleet().models
    assert models[NEW.name].parked and not models[OLD.name].parked, "an add never evicts"
    assert fleet.cluster.serve.deployed == [G1], "nothing started for it"
    held = fleet.cluster.routes.table.resolve(NEW.name)
    assert isinstance(held, Hold) and held.wake is not None, "its first request wakes it"
    fleet.clock.now += 100
    woken = fleet.engine.run(WakeRequest(name=NEW.name, trigger=WakeTrigger.REQUEST))
    assert woken.outcome is Outcome.DONE, woken.message
    assert fleet.engine.fleet().models[OLD.name].parked


def test_an_always_model_must_fit_beside_the_models_resident_now(fleet: Fleet) -> None:
    fleet.cluster.nodes.slots = 1
    _add(fleet, OLD, **ON_DEMAND)
    result = fleet.engine.run(AddRequest(config=NEW, entry=_entry(NEW)))
    assert result.outcome is Outcome.REJECTED
    assert NEW.name not in fleet.engine.fleet().models


def test_the_plan_adds_parked_and_notes_models_never_resident_together(fleet: Fleet) -> None:
    fleet.cluster.nodes.slots = 2
    _add(fleet, OLD, **ON_DEMAND)
    desired = FleetFile.model_validate(
        {
            "models": [
                _entry(OLD, **ON_DEMAND).written(),
                {**_entry(NEW, **ON_DEMAND).written(), "layout": "auto"},
                {**_entry(NEW, **ON_DEMAND).written(), "name": "mini-big", "layout": {"tp": 2}},
            ]
        }
    )
    plan = fleet.engine.plan(desired).to_json()
    assert plan["admitted"], plan
    added = {c["model"]: c for c in plan["changes"]}
    assert added[NEW.name]["parked"] is False, "it fits beside OLD: started"
    assert added["mini-big"]["parked"] is True, "it fits once OLD and NEW park"
    assert plan["never_resident_together"] == [["mini-big", NEW.name], ["mini-big", OLD.name]]
    lines = "\n".join(plan_lines(plan))
    assert "added parked" in lines and "never resident together" in lines


def test_park_mode_sleep_is_refused_on_the_cpu_engine_and_changes_nothing(fleet: Fleet) -> None:
    entry = _entry(OLD, residency="on_demand", park_mode="sleep")
    result = fleet.engine.run(AddRequest(config=OLD, entry=entry))
    assert result.outcome is Outcome.REJECTED
    assert "sleep_mode_unavailable" in result.message and "cpu-standin" in result.message
    assert fleet.cluster.serve.deployed == [] and fleet.engine.fleet().models == {}


def test_park_mode_sleep_is_admitted_on_accelerators_with_sleep_mode() -> None:
    gpus = ClusterInventory.homogeneous("rtx-pro-6000", 1, 8, host_ram_gib=2048)
    assert park_mode_refusals(ParkMode.SLEEP, gpus) == ()
    assert park_mode_refusals(ParkMode.UNLOAD, ClusterInventory.homogeneous("h100", 1, 8)) == ()
