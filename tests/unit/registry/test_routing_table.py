"""The routing table's pure rules: versioning, tombstones, aliases and how a name resolves."""

from __future__ import annotations

import pickle

import pytest

from domain.model_state import ModelState
from serve_apps.registry.routing_table import Forward, Hold, ModelRoute, Refuse, RoutingTable


def _route(name: str, state: ModelState = ModelState.READY) -> ModelRoute:
    return ModelRoute(
        name=name, app_name=f"model-{name}", deployment_name=f"model-{name}:{name}", state=state
    )


def _table() -> RoutingTable:
    return RoutingTable().with_model(_route("a")).with_model(_route("b")).with_alias("default", "a")


def test_a_ready_model_is_forwarded_by_name() -> None:
    table = _table()
    assert table.resolve("a") == Forward(route=table.models["a"])


def test_an_alias_forwards_to_the_model_it_names() -> None:
    table = _table()
    assert table.resolve("default") == Forward(route=table.models["a"])


def test_an_unknown_model_is_refused_with_404_naming_it() -> None:
    resolution = _table().resolve("nope")
    assert isinstance(resolution, Refuse)
    assert (resolution.status, resolution.code) == (404, "model_not_found")
    assert "'nope'" in resolution.message


def test_a_removed_model_is_refused_with_404_naming_its_replacement() -> None:
    table = _table().without_model("b", replaced_by="c")
    resolution = table.resolve("b")
    assert isinstance(resolution, Refuse)
    assert (resolution.status, resolution.code) == (404, "model_not_found")
    assert "replaced by 'c'" in resolution.message
    assert "send requests to 'c'" in resolution.message


def test_a_removed_model_without_replacement_says_it_was_removed() -> None:
    resolution = _table().without_model("b").resolve("b")
    assert isinstance(resolution, Refuse)
    assert resolution.status == 404
    assert resolution.message == "The model 'b' was removed."


def test_a_held_alias_is_held_even_though_its_target_is_ready() -> None:
    table = _table().with_holds({"default": None})
    assert table.resolve("default") == Hold(alias="default")
    # Holding an alias does not hold the model's own name.
    assert isinstance(table.resolve("a"), Forward)


@pytest.mark.parametrize(
    "state", [ModelState.LOADING, ModelState.DRAINING, ModelState.DEGRADED], ids=str
)
def test_a_model_that_is_not_ready_is_refused_with_503_naming_its_state(
    state: ModelState,
) -> None:
    resolution = _table().with_state("a", state).resolve("default")
    assert isinstance(resolution, Refuse)
    assert (resolution.status, resolution.code) == (503, "model_unavailable")
    assert f"'a' is {state.value}" in resolution.message


def test_a_failed_model_is_refused_with_503_carrying_its_error() -> None:
    resolution = _table().with_state("a", ModelState.FAILED, error="CUDA OOM").resolve("a")
    assert isinstance(resolution, Refuse)
    assert resolution.status == 503
    assert "failed to start: CUDA OOM" in resolution.message


def test_every_change_makes_a_new_table_with_version_plus_one() -> None:
    base = RoutingTable(version=7)
    with_a = base.with_model(_route("a"))
    assert (base.version, with_a.version) == (7, 8)
    assert with_a.with_alias("x", "a").version == 9
    assert with_a.with_state("a", ModelState.DRAINING).version == 9
    assert with_a.with_holds({"x": None}).version == 9
    assert with_a.without_model("a").version == 9


def test_changes_leave_the_original_table_untouched() -> None:
    base = _table()
    changed = base.with_state("a", ModelState.DRAINING).with_alias("default", "b")
    assert base.models["a"].state is ModelState.READY
    assert base.aliases == {"default": "a"}
    assert changed.models["a"].state is ModelState.DRAINING
    assert changed.aliases == {"default": "b"}


def test_with_state_sets_and_clears_the_error() -> None:
    failed = _table().with_state("a", ModelState.FAILED, error="boom")
    assert failed.models["a"].error == "boom"
    assert failed.with_state("a", ModelState.LOADING).models["a"].error is None


def test_without_model_leaves_a_tombstone_and_drops_only_its_aliases() -> None:
    table = _table().with_alias("other", "b").with_alias("first", "a")
    removed = table.without_model("a", replaced_by="b")
    tomb = removed.models["a"]
    assert tomb.state is ModelState.REMOVED
    assert tomb.replaced_by == "b"
    assert removed.aliases == {"other": "b"}


def test_aliases_of_lists_a_models_aliases_sorted() -> None:
    table = _table().with_alias("zeta", "a").with_alias("alpha", "a").with_alias("x", "b")
    assert table.aliases_of("a") == ("alpha", "default", "zeta")
    assert table.aliases_of("b") == ("x",)
    assert table.aliases_of("c") == ()


def test_live_models_are_sorted_and_exclude_tombstones() -> None:
    table = (
        RoutingTable()
        .with_model(_route("c", ModelState.LOADING))
        .with_model(_route("a"))
        .with_model(_route("b"))
        .without_model("b")
    )
    assert [r.name for r in table.live_models()] == ["a", "c"]


def test_a_table_survives_pickling_across_actor_boundaries() -> None:
    table = _table().with_holds({"default": None}).without_model("b", replaced_by="a")
    assert pickle.loads(pickle.dumps(table)) == table


def test_a_switch_moves_aliases_tombstones_old_and_releases_holds_in_one_version() -> None:
    held = _table().with_alias("chat", "a").with_holds({"default": 123.0, "chat": 123.0})
    switched = held.with_switch(_route("c"), frozenset({"default", "chat"}), "a")
    assert switched.version == held.version + 1
    assert switched.resolve("default") == Forward(route=switched.models["c"])
    assert switched.models["a"].state is ModelState.REMOVED
    assert switched.models["a"].replaced_by == "c"
    assert switched.holds == {}


def test_a_switch_keeps_holds_it_does_not_release() -> None:
    held = _table().with_holds({"default": 50.0, "other": 70.0})
    switched = held.with_switch(_route("c"), frozenset({"default"}), None)
    assert switched.holds == {"other": 70.0}
    assert switched.models["a"].state is ModelState.READY


def test_holds_are_per_alias_each_with_its_own_predicted_end() -> None:
    held = _table().with_holds({"default": 99.5}).with_holds({"other": None})
    assert held.resolve("default") == Hold(alias="default", ends_at=99.5)
    assert held.resolve("other") == Hold(alias="other", ends_at=None)
    released = held.without_holds(["default"])
    assert released.holds == {"other": None}
    assert isinstance(released.resolve("default"), Forward)
    assert held.without_holds().holds == {}


def test_many_aliases_move_in_one_version_and_are_listed_per_model_in_one_pass() -> None:
    table = _table()
    moved = table.with_aliases({f"alias-{i:04d}": "a" for i in range(1000)})
    assert moved.version == table.version + 1
    by_model = moved.aliases_by_model()
    assert len(by_model["a"]) == 1000 + len(table.aliases_of("a"))
    assert by_model["a"] == moved.aliases_of("a"), "the same, sorted, as one model at a time"
