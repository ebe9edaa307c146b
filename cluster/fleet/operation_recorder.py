"""The bookkeeping of one running operation: journal entries, progress events, phase timings
and their metrics. Journals each step before the engine acts on it."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import replace

from cluster.fleet.fleet_metrics import FleetMetrics, SwapSubject
from cluster.fleet.journal import Journal
from domain.operation import (
    OperationDetails,
    OperationEvent,
    OperationKind,
    OperationResult,
    Outcome,
    RunningOperation,
    SwapPhase,
    now,
)

log = logging.getLogger(__name__)


class OperationRecorder:
    def __init__(
        self,
        journal: Journal,
        metrics: FleetMetrics,
        kind: OperationKind,
        details: OperationDetails,
    ) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.kind = kind
        self.details = details
        self.events: list[OperationEvent] = []
        self.phase_seconds: dict[str, float] = {}
        self._journal = journal
        self._metrics = metrics
        self._phase: str | None = None
        self._phase_started = time.monotonic()
        self._started = self._phase_started
        # Swap metrics are labelled with both models; a dry run swaps nothing.
        self._swap = (
            SwapSubject(details.old or "", details.new or "", str(details.strategy or "auto"))
            if kind is OperationKind.SWAP and not details.dry_run
            else None
        )
        journal.append(
            {
                "op_id": self.id,
                "event": "start",
                "kind": kind.value,
                "details": details.model_dump(mode="json"),
                "at": now(),
            }
        )

    @property
    def phase_now(self) -> str | None:
        return self._phase

    def phase(self, phase: SwapPhase, message: str) -> None:
        self._close_phase()
        self._phase = str(phase)
        self._phase_started = time.monotonic()
        # Journal first, then act: a restart knows this step may have begun.
        self._journal.append(
            {"op_id": self.id, "event": "phase", "phase": self._phase, "at": now()}
        )
        self._metrics.phase_started(self.kind.value, self._phase, self._swap)
        self.note(message)

    def decide(self, **fields: object) -> None:
        """Set details decided on the way (a swap's strategy), journaled before acting on
        them: a restart reads them back with the operation."""
        for name, value in fields.items():
            setattr(self.details, name, value)
        if self._swap is not None and self.details.strategy is not None:
            self._swap = replace(self._swap, strategy=str(self.details.strategy))
        decided = self.details.model_dump(mode="json", include=set(fields))
        self._journal.append({"op_id": self.id, "event": "details", "details": decided})

    def alias_unavailability(self, seconds: Mapping[str, float]) -> None:
        """How long each alias this swap moves had no model serving it."""
        self.details.alias_unavailable_s = {a: round(v, 3) for a, v in sorted(seconds.items())}
        if self._swap is not None:
            self._metrics.alias_unavailability(self._swap, self.details.alias_unavailable_s)

    def note(self, message: str) -> None:
        self.events.append(OperationEvent(at=now(), phase=self._phase or "", message=message))
        log.info("[%s %s] %s", self.kind.value, self._phase, message)

    def _close_phase(self) -> None:
        if self._phase is None:
            return
        seconds = time.monotonic() - self._phase_started
        self.phase_seconds[self._phase] = self.phase_seconds.get(self._phase, 0.0) + seconds
        self._metrics.phase_finished(self.kind.value, self._phase, seconds, self._swap)
        self.events.append(
            OperationEvent(
                at=now(),
                phase=self._phase,
                message=f"{self._phase} took {seconds:.1f} s",
                seconds=seconds,
            )
        )

    def end(self, outcome: Outcome, message: str) -> OperationResult:
        self._close_phase()
        self._phase = None
        self.note(message)
        self._metrics.operation_finished(
            self.kind.value, outcome.value, time.monotonic() - self._started, self._swap
        )
        self._journal.append(
            {
                "op_id": self.id,
                "event": "end",
                "outcome": outcome.value,
                "message": message,
                "phase_seconds": self.phase_seconds,
                "at": now(),
            }
        )
        return OperationResult(
            op_id=self.id,
            kind=self.kind,
            outcome=outcome,
            message=message,
            events=list(self.events),
            phase_seconds=dict(self.phase_seconds),
            details=self.details.model_copy(deep=True),
            strategy=self.details.strategy,
            strategy_reason=self.details.strategy_reason,
        )

    def running(self) -> RunningOperation:
        return RunningOperation(
            op_id=self.id, kind=self.kind, details=self.details, events=list(self.events)
        )
