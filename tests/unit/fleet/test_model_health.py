"""Health rules: a served model without a running replica is DEGRADED until one runs again."""

from __future__ import annotations

from cluster.fleet.model_health import HealthChange, health_changes
from domain.model_state import ModelState

APPS = {"kimi": "model-kimi", "llama": "model-llama"}


def test_a_ready_model_that_lost_every_replica_is_degraded_with_the_reason() -> None:
    changes = health_changes(
        {"kimi": ModelState.READY, "llama": ModelState.READY},
        APPS,
        {"model-kimi": 0, "model-llama": 1},
    )
    assert [(c.name, c.state) for c in changes] == [("kimi", ModelState.DEGRADED)]
    assert "no running replica of model-kimi" in changes[0].reason
    assert "re-placing it when capacity allows" in changes[0].reason


def test_a_degraded_model_is_ready_again_once_a_replica_runs() -> None:
    changes = health_changes({"kimi": ModelState.DEGRADED}, APPS, {"model-kimi": 2})
    assert changes == [
        HealthChange("kimi", ModelState.READY, "2 replica(s) of model-kimi running again")
    ]


def test_a_model_whose_application_vanished_is_degraded() -> None:
    (change,) = health_changes({"kimi": ModelState.READY}, APPS, {})
    assert change.state is ModelState.DEGRADED
    assert "application model-kimi is gone" in change.reason


def test_states_owned_by_an_operation_never_move() -> None:
    published = {
        "a": ModelState.LOADING,
        "b": ModelState.DRAINING,
        "c": ModelState.FAILED,
        "d": ModelState.REMOVED,
    }
    apps = {name: f"model-{name}" for name in published}
    assert health_changes(published, apps, dict.fromkeys(apps.values(), 0)) == []
    assert health_changes(published, apps, dict.fromkeys(apps.values(), 1)) == []


def test_healthy_and_still_degraded_models_change_nothing() -> None:
    published = {"kimi": ModelState.READY, "llama": ModelState.DEGRADED}
    assert health_changes(published, APPS, {"model-kimi": 1, "model-llama": 0}) == []


def test_a_change_serialises_for_the_journal() -> None:
    change = HealthChange("kimi", ModelState.DEGRADED, "node lost")
    assert change.to_json() == {"model": "kimi", "state": "degraded", "reason": "node lost"}
