"""Which models the fleet parks by itself (domain/residency.py): idle on-demand models, and
for room the least recently used on-demand models resident long enough; never `always`."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from domain.accelerator_claims import summed_claims
from domain.fleet_file import FleetModelEntry
from domain.residency import (
    Demand,
    Residency,
    ResidentModel,
    eviction_order,
    idle_to_park,
    never_resident_together,
)

pytestmark = pytest.mark.unit


def _model(
    name: str,
    *,
    residency: Residency = Residency.ON_DEMAND,
    parked: bool = False,
    idle_s: float = 0.0,
    resident_s: float = 1000.0,
) -> ResidentModel:
    return ResidentModel(
        name=name,
        residency=residency,
        parked=parked,
        park_after_idle_s=600.0,
        min_resident_s=60.0,
        idle_s=idle_s,
        resident_s=resident_s,
    )


def test_idle_on_demand_models_are_parked_and_always_models_never() -> None:
    models = [
        _model("idle", idle_s=700),
        _model("busy", idle_s=10),
        _model("pinned", residency=Residency.ALWAYS, idle_s=9000),
        _model("already", parked=True, idle_s=9000),
        # Woken 100 s ago after a long sleep: idle counts from its wake.
        _model("just-woken", idle_s=9000, resident_s=100),
    ]
    assert idle_to_park(models) == ["idle"]


def test_room_is_made_least_recently_used_first_and_never_from_young_or_always_models() -> None:
    models = [
        _model("recent", idle_s=5),
        _model("oldest", idle_s=500),
        _model("older", idle_s=50),
        _model("young", idle_s=900, resident_s=30),
        _model("pinned", residency=Residency.ALWAYS, idle_s=9000),
        _model("waking", parked=True),
    ]
    assert eviction_order(models, waking="waking") == ["oldest", "older", "recent"]


def test_residency_keys_are_checked() -> None:
    base = {"name": "m", "source": "miniature:llama"}
    entry = FleetModelEntry.model_validate(
        {**base, "residency": "on_demand", "park_after_idle_s": 30, "min_resident_s": 5}
    )
    assert entry.residency_form() == {
        "residency": "on_demand",
        "park_after_idle_s": 30,
        "min_resident_s": 5,
        "park_mode": "unload",
    }
    assert entry.written()["residency"] == "on_demand", "export writes them back"
    with pytest.raises(ValidationError, match="only meaningful with residency: on_demand"):
        FleetModelEntry.model_validate({**base, "park_after_idle_s": 30})
    with pytest.raises(ValidationError, match="greater than 0"):
        FleetModelEntry.model_validate({**base, "residency": "on_demand", "park_after_idle_s": 0})


def test_on_demand_models_needing_more_than_the_always_models_leave_are_never_together() -> None:
    fleet = [
        Demand("pinned", Residency.ALWAYS, 2),
        Demand("kimi", Residency.ON_DEMAND, 4),
        Demand("minimax", Residency.ON_DEMAND, 4),
        Demand("small", Residency.ON_DEMAND, 2),
    ]
    # 8 accelerators, 2 pinned: 6 left for the on-demand models.
    assert never_resident_together(fleet, 8) == [("kimi", "minimax")]
    assert never_resident_together(fleet, 10) == []


def test_claims_of_several_models_add_up_per_node() -> None:
    assert summed_claims([{"a": 2}, {"a": 1, "b": 4}, {}]) == {"a": 3, "b": 4}
    assert summed_claims([]) == {}


def test_sleep_mode_is_part_of_the_deployment_and_its_level_of_the_residency() -> None:
    base = {"name": "m", "source": "miniature:llama"}
    asleep = FleetModelEntry.model_validate({**base, "park_mode": "sleep", "sleep_level": 2})
    assert asleep.deployed_form()["park_mode"] == "sleep", "the engine starts with sleep mode"
    assert asleep.residency_form()["sleep_level"] == 2
    unloaded = FleetModelEntry.model_validate(base)
    assert "park_mode" not in unloaded.deployed_form(), "forms from before sleep mode hold"
    assert "sleep_level" not in unloaded.residency_form()
    assert FleetModelEntry.model_validate({**base, "park_mode": "sleep"}).sleep_level == 1
    with pytest.raises(ValidationError, match="sleep_level: only meaningful with park_mode"):
        FleetModelEntry.model_validate({**base, "sleep_level": 2})
    with pytest.raises(ValidationError, match="sleep_level"):
        FleetModelEntry.model_validate({**base, "park_mode": "sleep", "sleep_level": 3})
