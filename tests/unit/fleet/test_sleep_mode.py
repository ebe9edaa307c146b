"""Parking by vLLM's sleep mode (cluster/fleet/residency.py), on the in-memory cluster
declaring GPUs: a model with `park_mode: sleep` starts with sleep mode enabled, is drained
and put to sleep where it runs, and wakes there without a cold start or a new generation;
to make room it is unloaded; a restart at any step converges."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.fleet.ports import AppStatus
from domain.deployment_config import AcceleratorConfig, LayoutConfig, ModelDeploymentConfig
from domain.fleet_file import FleetModelEntry
from domain.model_state import ModelState
from domain.operation import Outcome, SwapPhase
from domain.operation_request import (
    AddRequest,
    ParkRequest,
    ResidencyRequest,
    WakeRequest,
)
from serve_apps.engine.fake_engine import FakeEngineSettings
from serve_apps.registry.routing_table import ModelRoute
from tests.support.fleet_configs import OLD, new_model
from tests.support.memory_cluster import Killed, MemoryCluster
from tests.support.memory_fleet import Fleet

pytestmark = pytest.mark.unit

GPU = AcceleratorConfig(kind="gpu")
SLEEPER = OLD.model_copy(update={"accelerator": GPU})
OTHER = new_model("miniature:llama-new").model_copy(update={"accelerator": GPU})
G1 = "model-mini-old-g1"


def _gpu_node(tmp_path: Path, gpus: int, fake_engines: FakeEngineSettings | None) -> Fleet:
    """One node of `gpus` RTX PRO 6000s (logical: the control plane is the subject)."""
    cluster = MemoryCluster(tmp_path / "nodes")
    cluster.nodes.gpu_model = "rtx-pro-6000"
    cluster.nodes.slot_memory_gib = 95.6
    cluster.nodes.slots = gpus
    return Fleet(tmp_path / "state", cluster, accelerator=GPU, fake_engines=fake_engines)


@pytest.fixture
def gpus(tmp_path: Path) -> Fleet:
    """One GPU, vLLM's engines: a sleeping engine keeps its GPU."""
    return _gpu_node(tmp_path, 1, fake_engines=None)


def _entry(config: ModelDeploymentConfig, **keys: object) -> FleetModelEntry:
    return FleetModelEntry.model_validate({**FleetModelEntry.of_config(config).written(), **keys})


def _add_sleeper(fleet: Fleet, config: ModelDeploymentConfig = SLEEPER, **keys: object) -> None:
    entry = _entry(config, park_mode="sleep", **keys)
    result = fleet.engine.run(AddRequest(config=config, entry=entry))
    assert result.outcome is Outcome.DONE, result.message


def _phases(fleet: Fleet, kind: str) -> list[str]:
    ops = [e for e in fleet.journal.entries() if e.get("kind") == kind]
    op_id = ops[-1]["op_id"]
    return [
        e["phase"]
        for e in fleet.journal.entries()
        if e.get("op_id") == op_id and e.get("event") == "phase"
    ]


def test_a_sleep_mode_model_starts_its_engine_with_sleep_mode_enabled(gpus: Fleet) -> None:
    _add_sleeper(gpus)
    assert gpus.cluster.serve.configs[G1].engine.enable_sleep_mode is True


def test_a_park_drains_then_puts_every_replica_to_sleep_where_it_runs(gpus: Fleet) -> None:
    _add_sleeper(gpus)
    result = gpus.engine.run(ParkRequest(name=SLEEPER.name))
    assert result.outcome is Outcome.DONE and "asleep at level 1" in result.message
    assert _phases(gpus, "park") == ["draining", "sleeping"]
    assert gpus.cluster.serve.engine_calls == [("sleep", G1, 1)]
    model = gpus.engine.fleet().models[SLEEPER.name]
    assert model.parked and model.asleep_level == 1
    # Its engine and accelerators stay: nothing deleted.
    assert gpus.cluster.serve.apps == {G1: AppStatus.RUNNING}
    assert gpus.cluster.routes.table.models[SLEEPER.name].state is ModelState.PARKED


def test_a_wake_from_sleep_serves_the_same_engine_again_without_a_cold_start(
    gpus: Fleet,
) -> None:
    _add_sleeper(gpus)
    gpus.engine.run(ParkRequest(name=SLEEPER.name))
    seen: list[ModelRoute] = []
    put_route = gpus.cluster.routes.put_route

    def record(route: ModelRoute) -> None:
        seen.append(route)
        put_route(route)

    gpus.cluster.routes.put_route = record  # type: ignore[method-assign]
    result = gpus.engine.run(WakeRequest(name=SLEEPER.name))
    assert result.outcome is Outcome.DONE and "level_1 wake" in result.message
    assert _phases(gpus, "wake") == [SwapPhase.WAKING.value]
    assert gpus.cluster.serve.deployed == [G1], "no new engine"
    assert gpus.cluster.serve.engine_calls[-1] == ("wake", G1, 1)
    model = gpus.engine.fleet().models[SLEEPER.name]
    assert not model.parked and model.asleep_level is None and model.generation == 1
    assert gpus.cluster.routes.table.models[SLEEPER.name].state is ModelState.READY
    # The hold was told when to expect it, and the wake went into the model's history.
    (waking,) = [r for r in seen if r.state is ModelState.WAKING]
    assert waking.ready_by is not None
    assert [w.path for w in model.wakes] == ["level_1"]
    ((name, path, predicted, measured),) = gpus.metrics.wake_predictions
    assert (name, path) == (SLEEPER.name, "level_1") and predicted > 0 and measured >= 0


def test_a_level_two_wake_reads_the_weights_into_the_page_cache_first(gpus: Fleet) -> None:
    _add_sleeper(gpus, sleep_level=2)
    gpus.engine.run(ParkRequest(name=SLEEPER.name))
    assert gpus.cluster.serve.engine_calls == [("sleep", G1, 2)]
    gpus.cluster.nodes.prefetched.clear()
    assert gpus.engine.run(WakeRequest(name=SLEEPER.name)).outcome is Outcome.DONE
    assert len(gpus.cluster.nodes.prefetched) == 1
    assert gpus.cluster.serve.engine_calls[-1] == ("wake", G1, 2)


def test_an_engine_that_will_not_wake_is_unloaded_and_the_next_wake_is_a_cold_start(
    gpus: Fleet,
) -> None:
    _add_sleeper(gpus)
    gpus.engine.run(ParkRequest(name=SLEEPER.name))
    gpus.cluster.serve.fail_wake.add(SLEEPER.name)
    result = gpus.engine.run(WakeRequest(name=SLEEPER.name))
    assert result.outcome is Outcome.FAILED and "unloaded" in result.message
    model = gpus.engine.fleet().models[SLEEPER.name]
    assert model.parked and model.asleep_level is None
    assert gpus.cluster.serve.apps == {}
    gpus.cluster.serve.fail_wake.clear()
    assert gpus.engine.run(WakeRequest(name=SLEEPER.name)).outcome is Outcome.DONE
    assert gpus.engine.fleet().models[SLEEPER.name].generation == 2, "a cold start"


def test_an_idle_sleep_mode_model_is_put_to_sleep_not_unloaded(gpus: Fleet) -> None:
    _add_sleeper(gpus, residency="on_demand", park_after_idle_s=30)
    gpus.clock.now += 1000
    gpus.cluster.routes.idle_s = {SLEEPER.name: 31}
    (result,) = gpus.engine.park_idle()
    assert result.outcome is Outcome.DONE
    assert gpus.engine.fleet().models[SLEEPER.name].asleep_level == 1
    assert gpus.cluster.serve.apps == {G1: AppStatus.RUNNING}


def test_a_model_asleep_is_unloaded_first_to_make_room_for_another_wake(gpus: Fleet) -> None:
    # One GPU: the sleeper holds it asleep; the other model is added parked.
    _add_sleeper(gpus, residency="on_demand", min_resident_s=0)
    gpus.engine.run(ParkRequest(name=SLEEPER.name))
    other = _entry(OTHER, residency="on_demand")
    added = gpus.engine.run(AddRequest(config=OTHER, entry=other))
    assert added.outcome is Outcome.DONE and "parked" in added.message
    result = gpus.engine.run(WakeRequest(name=OTHER.name))
    assert result.outcome is Outcome.DONE, result.message
    sleeper = gpus.engine.fleet().models[SLEEPER.name]
    assert sleeper.parked and sleeper.asleep_level is None, "unloaded, not asleep"
    assert G1 not in gpus.cluster.serve.apps


def test_a_new_sleep_level_is_a_residency_change_the_next_park_uses(gpus: Fleet) -> None:
    _add_sleeper(gpus)
    deeper = _entry(SLEEPER, park_mode="sleep", sleep_level=2)
    changed = gpus.engine.run(ResidencyRequest(name=SLEEPER.name, entry=deeper))
    assert changed.outcome is Outcome.DONE, changed.message
    gpus.engine.run(ParkRequest(name=SLEEPER.name))
    assert gpus.cluster.serve.engine_calls == [("sleep", G1, 2)]


@pytest.mark.parametrize(
    ("point", "request_kind"),
    [("sleep", "park"), ("wake", "wake"), ("warm_up", "wake")],
    ids=["killed falling asleep", "killed waking", "killed warming up"],
)
def test_a_manager_killed_mid_sleep_or_wake_converges(
    gpus: Fleet, point: str, request_kind: str
) -> None:
    _add_sleeper(gpus)
    if request_kind == "wake":
        gpus.engine.run(ParkRequest(name=SLEEPER.name))
    gpus.cluster.arm(point, SLEEPER.name)
    request = ParkRequest if request_kind == "park" else WakeRequest
    with pytest.raises(Killed):
        gpus.engine.run(request(name=SLEEPER.name))
    gpus.restart()
    ends = [e for e in gpus.journal.entries() if e.get("after_restart")]
    assert [e["outcome"] for e in ends] == ["done"], ends
    model = gpus.engine.fleet().models[SLEEPER.name]
    assert gpus.cluster.serve.apps == {G1: AppStatus.RUNNING}, "the engine was kept"
    if request_kind == "park":
        assert model.parked and model.asleep_level == 1
        assert G1 in gpus.cluster.serve.asleep
    else:
        assert not model.parked and G1 not in gpus.cluster.serve.asleep
        assert gpus.cluster.routes.table.models[SLEEPER.name].state is ModelState.READY


# ------------------------------------------- two engines on one set of accelerators


@pytest.fixture
def shared(tmp_path: Path) -> Fleet:
    """Four GPUs and the stand-in engine, whose sleep-mode ranks take half a GPU."""
    return _gpu_node(tmp_path, 4, fake_engines=FakeEngineSettings())


WIDE = SLEEPER.model_copy(update={"layout": LayoutConfig(tp=4)})
PAIR = OTHER.model_copy(update={"layout": LayoutConfig(tp=2), "replicas": 2})
ON_DEMAND = {"residency": "on_demand", "min_resident_s": 0}


def _sharing(fleet: Fleet) -> None:
    """WIDE (tp 4) awake on all four GPUs; PAIR (2 x tp 2) added beside it, parked."""
    _add_sleeper(fleet, WIDE, **ON_DEMAND)
    pair = _entry(PAIR, park_mode="sleep", **ON_DEMAND)
    added = fleet.engine.run(AddRequest(config=PAIR, entry=pair))
    assert added.outcome is Outcome.DONE and "parked" in added.message, added.message


def test_a_wake_puts_the_engine_awake_on_its_accelerators_to_sleep_not_away(
    shared: Fleet,
) -> None:
    _sharing(shared)
    result = shared.engine.run(WakeRequest(name=PAIR.name))
    assert result.outcome is Outcome.DONE, result.message
    models = shared.engine.fleet().models
    assert models[WIDE.name].asleep_level == 1, "asleep beside it, not unloaded"
    assert not models[PAIR.name].parked
    assert set(shared.cluster.serve.apps) == {G1, "model-mini-new-g2"}
    assert shared.cluster.serve.engine_calls == [("sleep", G1, 1)]


def test_alternating_wakes_swap_which_engine_sleeps_without_a_cold_start(
    shared: Fleet,
) -> None:
    _sharing(shared)
    shared.engine.run(WakeRequest(name=PAIR.name))
    for waking, sleeping in ((WIDE, PAIR), (PAIR, WIDE), (WIDE, PAIR)):
        result = shared.engine.run(WakeRequest(name=waking.name))
        assert result.outcome is Outcome.DONE and "level_1 wake" in result.message
        models = shared.engine.fleet().models
        assert not models[waking.name].parked
        assert models[sleeping.name].asleep_level == 1
    # One cold start each (PAIR's first wake), then wakes and sleeps only.
    assert shared.cluster.serve.deployed == [G1, "model-mini-new-g2"]
    assert [c for c, _, _ in shared.cluster.serve.engine_calls].count("sleep") == 4


def test_an_always_model_awake_on_the_accelerators_keeps_a_sleeper_asleep(
    shared: Fleet,
) -> None:
    _add_sleeper(shared, WIDE, **ON_DEMAND)
    shared.engine.run(ParkRequest(name=WIDE.name))
    pinned = _entry(PAIR, park_mode="sleep")
    assert shared.engine.run(AddRequest(config=PAIR, entry=pinned)).outcome is Outcome.DONE
    result = shared.engine.run(WakeRequest(name=WIDE.name))
    assert result.outcome is Outcome.REJECTED and "cannot be put to sleep" in result.message
    assert shared.engine.fleet().models[WIDE.name].asleep_level == 1


def test_level_one_is_refused_where_host_memory_cannot_pin_the_weights(gpus: Fleet) -> None:
    gpus.cluster.nodes.host_ram_bytes = 2**20  # 1 MiB: less than the miniature's weights
    entry = _entry(SLEEPER, park_mode="sleep")
    refused = gpus.engine.run(AddRequest(config=SLEEPER, entry=entry))
    assert refused.outcome is Outcome.REJECTED and "sleep_host_memory" in refused.message
    assert "use sleep_level 2" in refused.message and gpus.cluster.serve.deployed == []
    deeper = _entry(SLEEPER, park_mode="sleep", sleep_level=2)
    assert gpus.engine.run(AddRequest(config=SLEEPER, entry=deeper)).outcome is Outcome.DONE
