"""Fleet operations and the phases of a hot swap, as documented enums and records."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class OperationKind(StrEnum):
    ADD = "add"
    """Bring a new model up beside the others."""
    SWAP = "swap"
    """Replace OLD by NEW on the same accelerators; OLD's aliases move to NEW."""
    REMOVE = "remove"
    """Take a model down and free its accelerators."""
    ALIAS = "alias"
    """Point an alias at a model."""


class SwapPhase(StrEnum):
    """Steps of a swap, journaled before each is acted on (see FleetManager.swap)."""

    PREFLIGHT = "preflight"
    """Admission of NEW against the inventory counting what OLD frees; NEW's weights staged
    while OLD still serves. A failure here changes nothing."""
    DRAINING = "draining"
    """OLD gets no new requests; its aliases are held in the gateways; in-flight requests
    and streams finish up to the drain deadline."""
    REMOVING_OLD = "removing_old"
    """OLD's Serve app and placement group are deleted until its accelerators are seen free."""
    DEPLOYING_NEW = "deploying_new"
    """NEW is deployed, health-checked and warmed with one real request."""
    SWITCHING = "switching"
    """Aliases move to NEW, OLD becomes a tombstone naming NEW, held requests are released."""
    ROLLING_BACK = "rolling_back"
    """NEW failed after the drain: NEW is removed, OLD comes back on its old layout."""


class Outcome(StrEnum):
    DONE = "done"
    REJECTED = "rejected"
    ROLLED_BACK = "rolled_back"
    FAILED = "failed"


@dataclass
class OperationEvent:
    at: float
    phase: str
    message: str
    seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "phase": self.phase,
            "message": self.message,
            "seconds": self.seconds,
        }


@dataclass
class OperationResult:
    op_id: str
    kind: OperationKind
    outcome: Outcome
    message: str
    events: list[OperationEvent] = field(default_factory=list)
    phase_seconds: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "op_id": self.op_id,
            "kind": self.kind.value,
            "outcome": self.outcome.value,
            "message": self.message,
            "phase_seconds": self.phase_seconds,
            "events": [e.to_json() for e in self.events],
            "details": self.details,
        }


def now() -> float:
    return time.time()
