"""Operation kinds, swap phases, outcomes and the JSON shape of an operation's result."""

from __future__ import annotations

import json

from domain.exit_codes import ExitCode
from domain.operation import (
    SCHEMA_VERSION,
    OperationDetails,
    OperationEvent,
    OperationKind,
    OperationResult,
    Outcome,
    SwapPhase,
)


def test_operation_kind_values() -> None:
    assert [k.value for k in OperationKind] == [
        "add",
        "swap",
        "remove",
        "alias",
        "park",
        "wake",
        "residency",
    ]


def test_swap_phases_in_order() -> None:
    assert [p.value for p in SwapPhase] == [
        "preflight",
        "draining",
        "removing_old",
        "deploying_new",
        "switching",
        "rolling_back",
        "sleeping",
        "waking",
    ]


def test_outcome_values() -> None:
    assert {o.value for o in Outcome} == {"done", "rejected", "rolled_back", "failed"}


def test_enums_are_strings() -> None:
    assert str(SwapPhase.DRAINING) == "draining"
    assert OperationKind("swap") is OperationKind.SWAP
    assert isinstance(Outcome.ROLLED_BACK, str)
    assert f"{Outcome.ROLLED_BACK}" == "rolled_back"


def test_event_json() -> None:
    event = OperationEvent(at=12.5, phase="draining", message="waiting", seconds=1.25)
    assert event.model_dump(mode="json") == {
        "at": 12.5,
        "phase": "draining",
        "message": "waiting",
        "seconds": 1.25,
    }
    assert OperationEvent(at=1.0, phase="p", message="m").model_dump()["seconds"] is None


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
        details=OperationDetails(old="a", new="b"),
    )
    out = result.model_dump(mode="json")
    assert set(out) == {
        "schema_version",
        "strategy",
        "strategy_reason",
        "op_id",
        "kind",
        "outcome",
        "message",
        "phase_seconds",
        "events",
        "details",
    }
    assert out["schema_version"] == SCHEMA_VERSION == 1
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
    # The result travels as JSON (`--json`, job logs) and back.
    assert json.loads(json.dumps(out)) == out
    assert OperationResult.model_validate(out) == result


def test_result_defaults_are_empty_and_not_shared() -> None:
    a = OperationResult(op_id="1", kind=OperationKind.ADD, outcome=Outcome.DONE, message="ok")
    b = OperationResult(op_id="2", kind=OperationKind.ADD, outcome=Outcome.DONE, message="ok")
    a.events.append(OperationEvent(at=0.0, phase="x", message="y"))
    a.phase_seconds["x"] = 1.0
    a.details.name = "k"
    assert b.events == []
    assert b.phase_seconds == {}
    assert b.model_dump(mode="json")["details"] == {}


def test_only_the_outcome_done_exits_0() -> None:
    assert Outcome.DONE.exit_code == ExitCode.OK
    for outcome in (Outcome.REJECTED, Outcome.ROLLED_BACK, Outcome.FAILED):
        assert outcome.exit_code == ExitCode.REJECTED


def test_details_carry_only_what_an_operation_set() -> None:
    details = OperationDetails(name="kimi", dry_run=False)
    assert details.model_dump(mode="json") == {"name": "kimi", "dry_run": False}
