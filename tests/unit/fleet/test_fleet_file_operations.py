"""Operations a fleet file asks for, on the in-memory cluster: an entry's `layout: auto`
resolved by admission and kept as written, a same-name swap (new engine settings under the
next app generation, by either strategy), the judged plan, and export."""

from __future__ import annotations

import pytest

from domain.app_name import AppName
from domain.fleet_file import FleetModelEntry, parse_fleet_file
from domain.model_state import ModelState
from domain.operation import Outcome, SwapStrategy
from domain.operation_request import AddRequest, SwapRequest
from tests.support.fleet_configs import OLD
from tests.support.memory_cluster import Killed
from tests.unit.fleet.conftest import Fleet

pytestmark = pytest.mark.unit

FILE = """
models:
  - name: mini-old
    source: miniature:llama
    aliases: [default]
    engine: {max_model_len: 512}
"""


def _entry(text: str = FILE) -> FleetModelEntry:
    return parse_fleet_file(text, "fleet.yaml").models[0]


@pytest.fixture
def from_file(fleet: Fleet) -> Fleet:
    entry = _entry()
    result = fleet.engine.run(AddRequest(config=entry.deployment(), entry=entry))
    assert result.outcome is Outcome.DONE, result.message
    return fleet


def test_layout_auto_is_resolved_by_admission_and_kept_as_written(from_file: Fleet) -> None:
    model = from_file.engine.fleet().models["mini-old"]
    assert model.entry is not None and model.entry == _entry() and model.entry.auto_layout
    assert model.config.layout.tp >= 1
    assert model.config.engine.enforce_eager, "the CPU platform's default still applies"
    (exported,) = from_file.engine.export()
    assert exported.written() == _entry().written()


@pytest.mark.parametrize(
    "strategy", [SwapStrategy.MAKE_BEFORE_BREAK, SwapStrategy.BREAK_BEFORE_MAKE]
)
def test_a_same_name_swap_runs_the_next_generation_under_the_same_name(
    from_file: Fleet, strategy: SwapStrategy
) -> None:
    changed = _entry(FILE.replace("512", "256"))
    request = SwapRequest(
        old="mini-old", config=changed.deployment(), entry=changed, strategy=strategy
    )
    result = from_file.engine.run(request)
    assert result.outcome is Outcome.DONE, result.message
    state = from_file.engine.fleet()
    model = state.models["mini-old"]
    assert model.generation == 2 and model.config.engine.max_model_len == 256
    assert model.entry == changed
    assert state.aliases == {"default": "mini-old"}
    table = from_file.cluster.routes.table
    route = table.models["mini-old"]
    assert (route.state, route.app_name) == (ModelState.READY, AppName("mini-old", 2).app)
    assert table.aliases == {"default": "mini-old"} and not table.held_aliases
    assert set(from_file.cluster.serve.slots_per_app) == {AppName("mini-old", 2).app}


def test_the_plan_judges_each_step_on_the_cluster_the_steps_before_leave(
    from_file: Fleet,
) -> None:
    desired = parse_fleet_file(
        FILE.replace("512", "256")
        + "  - {name: second, source: 'miniature:llama-b', aliases: [other], layout: {tp: 2}}\n",
        "fleet.yaml",
    )
    plan = from_file.engine.plan(desired).to_json()
    assert plan["admitted"]
    swap, add = plan["changes"]
    assert (swap["action"], swap["model"], swap["replaces"]) == ("swap", "mini-old", "mini-old")
    assert swap["strategy"] == "make-before-break" and swap["changed"] == ["engine"]
    assert swap["aliases"]["default"].startswith("nothing")
    assert (add["action"], add["model"], add["layout"]) == ("add", "second", "TP2xPP1xDP1")
    assert add["aliases"] == {"other": "new"}
    assert from_file.engine.fleet().models["mini-old"].generation == 1, "a plan changes nothing"


def test_a_step_that_does_not_fit_makes_the_plan_refused(from_file: Fleet) -> None:
    desired = parse_fleet_file(
        FILE + "  - {name: big, source: 'miniature:llama-b', layout: {tp: 8}}\n", "fleet.yaml"
    )
    plan = from_file.engine.plan(desired).to_json()
    assert not plan["admitted"]
    (add,) = plan["changes"]
    assert not add["admitted"] and add["reasons"]


def test_a_model_added_by_flags_exports_as_an_explicit_layout(fleet: Fleet) -> None:
    assert fleet.engine.run(AddRequest(config=OLD)).outcome is Outcome.DONE
    (exported,) = fleet.engine.export()
    assert exported.written()["layout"] == {"tp": 1}
    assert (
        parse_fleet_file(
            "models:\n  - " + str(exported.written()).replace("'", '"'), "export"
        ).models[0]
        == exported
    )


SAME_NAME_DEATHS = [
    (strategy, point)
    for strategy, points in (
        (
            SwapStrategy.MAKE_BEFORE_BREAK,
            ("preflight", "deploying_new", "switching", "draining", "removing_old"),
        ),
        (
            SwapStrategy.BREAK_BEFORE_MAKE,
            ("preflight", "draining", "removing_old", "deploying_new", "switching"),
        ),
    )
    for point in (f"journaled:{p}" for p in points)
] + [
    (SwapStrategy.MAKE_BEFORE_BREAK, "switched"),
    (SwapStrategy.BREAK_BEFORE_MAKE, "snapshot_saved:switching"),
]


@pytest.mark.parametrize(
    ("strategy", "point"), SAME_NAME_DEATHS, ids=[f"{s.value}-{p}" for s, p in SAME_NAME_DEATHS]
)
def test_a_manager_dying_in_a_same_name_swap_converges(
    from_file: Fleet, strategy: SwapStrategy, point: str
) -> None:
    changed = _entry(FILE.replace("512", "256"))
    request = SwapRequest(
        old="mini-old", config=changed.deployment(), entry=changed, strategy=strategy
    )
    from_file.cluster.arm(point, None)
    with pytest.raises(Killed):
        from_file.engine.run(request)
    from_file.restart()
    state = from_file.engine.fleet()
    (model,) = state.models.values()
    assert model.config.name == "mini-old" and state.aliases == {"default": "mini-old"}
    expected_len = 256 if model.generation == 2 else 512
    assert model.config.engine.max_model_len == expected_len
    table = from_file.cluster.routes.table
    route = table.models["mini-old"]
    assert (route.state, route.app_name) == (ModelState.READY, model.app.app)
    assert table.aliases == {"default": "mini-old"} and not table.held_aliases
    assert set(from_file.cluster.serve.slots_per_app) == {model.app.app}
    assert from_file.journal.unfinished() is None
