"""Operation kinds, swap phases, outcomes and the JSON shape of an operation's result."""

from __future__ import annotations

import json

from domain.operation import (
    OperationEvent,
    OperationKind,
    OperationResult,
    Outcome,
    SwapPhase,
)


def test_operation_kind_values() -> None:
    assert [k.value for k in OperationKind] == ["add", "swap", "remove", "alias"]


def test_swap_phases_in_order() -> None:
    assert [p.value for p in SwapPhase] == [
        "preflight",
        "draining",
        "removing_old",
        "deploying_new",
        "switching",
        "rolling_back",
    ]


def test_outcome_values() -> None:
    assert {o.value for o in Outcome} == {"done", "rejected", "rolled_back", "failed"}


def test_enums_are_strings() -> None:
    assert str(SwapPhase.DRAINING) == "draining"
    assert OperationKind("swap") is OperationKind.SWAP
    assert isinstance(Outcome.ROLLED_BACK, str)
    assert f"{Outcome.ROLLED_BACK}" == "rolled_back"


def test_event_to_json() -> None:
    event = OperationEvent(at=12.5, phase="draining", message="waiting", seconds=1.25)
    assert event.to_json() == {
        "at": 12.5,
        "phase": "draining",
        "message": "waiting",
        "seconds": 1.25,
    }
    assert OperationEvent(at=1.0, phase="p", message="m").to_json()["seconds"] is None


def test_result_to_json_shape() -> None:
    result = OperationResult(
        op_id="abc123",
        kind=OperationKind.SWAP,
        outcome=Outcome.ROLLED_BACK,
        message="new model failed; old model restored",
        events=[
            OperationEvent(at=1.0, phase="preflight", message="admitted", seconds=0.5),
            OperationEvent(at=2.0, phase="rolling_back", message="restoring"),
        ],
        phase_seconds={"preflight": 0.5, "rolling_back": 3.0},
        details={"old": "a", "new": "b"},
    )
    out = result.to_json()
    assert set(out) == {
        "op_id",
        "kind",
        "outcome",
        "message",
        "phase_seconds",
        "events",
        "details",
    }
    assert out["op_id"] == "abc123"
    assert out["kind"] == "swap"
    assert out["outcome"] == "rolled_back"
    assert type(out["kind"]) is str
    assert type(out["outcome"]) is str
    assert out["message"] == "new model failed; old model restored"
    assert out["phase_seconds"] == {"preflight": 0.5, "rolling_back": 3.0}
    assert out["details"] == {"old": "a", "new": "b"}
    assert out["events"] == [
        {"at": 1.0, "phase": "preflight", "message": "admitted", "seconds": 0.5},
        {"at": 2.0, "phase": "rolling_back", "message": "restoring", "seconds": None},
    ]
    # The result travels over Ray and HTTP as JSON.
    assert json.loads(json.dumps(out)) == out


def test_result_defaults_are_empty_and_not_shared() -> None:
    a = OperationResult(op_id="1", kind=OperationKind.ADD, outcome=Outcome.DONE, message="ok")
    b = OperationResult(op_id="2", kind=OperationKind.ADD, outcome=Outcome.DONE, message="ok")
    a.events.append(OperationEvent(at=0.0, phase="x", message="y"))
    a.phase_seconds["x"] = 1.0
    a.details["k"] = "v"
    assert b.to_json()["events"] == []
    assert b.to_json()["phase_seconds"] == {}
    assert b.to_json()["details"] == {}
