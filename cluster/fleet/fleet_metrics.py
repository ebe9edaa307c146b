"""What the fleet manager measures: model states, operations and their phases, admission
decisions, and accelerators and disk per node.

The fleet engine reports through `FleetMetrics`; `RayFleetMetrics`
(cluster/telemetry/ray_fleet_metrics.py) records into Ray's metrics pipeline from the manager
actor, `RecordingFleetMetrics` keeps it in memory for tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from domain.model_state import ModelState

ADMITTED_REASON = "none"


@dataclass(frozen=True)
class SwapSubject:
    """The two models of a swap and its strategy (labels of its phase gauges and
    annotations)."""

    old: str
    new: str
    strategy: str = "auto"


@dataclass(frozen=True)
class NodeUsage:
    node: str
    accelerators: int
    accelerators_claimed: int
    staged_bytes: int | None = None
    """None where this node's cache was not measured."""
    disk_free_bytes: int | None = None


class FleetMetrics(Protocol):
    def phase_started(self, kind: str, phase: str, swap: SwapSubject | None) -> None: ...

    def phase_finished(
        self, kind: str, phase: str, seconds: float, swap: SwapSubject | None
    ) -> None: ...

    def operation_finished(
        self, kind: str, outcome: str, seconds: float, swap: SwapSubject | None
    ) -> None: ...

    def admission(self, admitted: bool, reason_codes: Sequence[str]) -> None: ...

    def node_staging(self, node: str, outcome: str, downloaded_bytes: int) -> None: ...

    def alias_unavailability(self, swap: SwapSubject, seconds: Mapping[str, float]) -> None:
        """How long each alias the swap moved had no model serving it."""

    def startup_steps(self, seconds: Mapping[str, float | None]) -> None:
        """Where one deployment's start went (a step not shown is None)."""

    def fleet(self, states: Mapping[str, ModelState], aliases: Mapping[str, str]) -> None:
        """The models (name -> state) and aliases (alias -> model) as they are now."""

    def nodes(self, usage: Sequence[NodeUsage]) -> None: ...

    def parked(self, model: str, reason: str) -> None: ...

    def woken(
        self, model: str, park_mode: str, trigger: str, outcome: str, seconds: float | None
    ) -> None: ...

    def wake_predicted(self, model: str, path: str, predicted_s: float, measured_s: float) -> None:
        """A wake from sleep: its prediction beside what it took."""


@dataclass
class RecordingFleetMetrics:
    phases: list[tuple[str, str, float, SwapSubject | None]] = field(default_factory=list)
    started: list[tuple[str, str, SwapSubject | None]] = field(default_factory=list)
    operations: list[tuple[str, str, float, SwapSubject | None]] = field(default_factory=list)
    admissions: list[tuple[bool, tuple[str, ...]]] = field(default_factory=list)
    states: dict[str, ModelState] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    node_usage: list[NodeUsage] = field(default_factory=list)
    unavailable: list[tuple[SwapSubject, dict[str, float]]] = field(default_factory=list)
    startups: list[dict[str, float | None]] = field(default_factory=list)
    node_stagings: list[tuple[str, str, int]] = field(default_factory=list)
    parks: list[tuple[str, str]] = field(default_factory=list)
    wakes: list[tuple[str, str, str, str, float | None]] = field(default_factory=list)
    wake_predictions: list[tuple[str, str, float, float]] = field(default_factory=list)

    def wake_predicted(self, model: str, path: str, predicted_s: float, measured_s: float) -> None:
        self.wake_predictions.append((model, path, predicted_s, measured_s))

    def parked(self, model: str, reason: str) -> None:
        self.parks.append((model, reason))

    def woken(
        self, model: str, park_mode: str, trigger: str, outcome: str, seconds: float | None
    ) -> None:
        self.wakes.append((model, park_mode, trigger, outcome, seconds))

    def startup_steps(self, seconds: Mapping[str, float | None]) -> None:
        self.startups.append(dict(seconds))

    def phase_started(self, kind: str, phase: str, swap: SwapSubject | None) -> None:
        self.started.append((kind, phase, swap))

    def phase_finished(
        self, kind: str, phase: str, seconds: float, swap: SwapSubject | None
    ) -> None:
        self.phases.append((kind, phase, seconds, swap))

    def operation_finished(
        self, kind: str, outcome: str, seconds: float, swap: SwapSubject | None
    ) -> None:
        self.operations.append((kind, outcome, seconds, swap))

    def alias_unavailability(self, swap: SwapSubject, seconds: Mapping[str, float]) -> None:
        self.unavailable.append((swap, dict(seconds)))

    def admission(self, admitted: bool, reason_codes: Sequence[str]) -> None:
        self.admissions.append((admitted, tuple(reason_codes)))

    def node_staging(self, node: str, outcome: str, downloaded_bytes: int) -> None:
        self.node_stagings.append((node, outcome, downloaded_bytes))

    def fleet(self, states: Mapping[str, ModelState], aliases: Mapping[str, str]) -> None:
        self.states, self.aliases = dict(states), dict(aliases)

    def nodes(self, usage: Sequence[NodeUsage]) -> None:
        self.node_usage = list(usage)


class DiscardFleetMetrics:
    def parked(self, model: str, reason: str) -> None:
        return None

    def woken(
        self, model: str, park_mode: str, trigger: str, outcome: str, seconds: float | None
    ) -> None:
        return None

    def wake_predicted(self, model: str, path: str, predicted_s: float, measured_s: float) -> None:
        return None

    def phase_started(self, kind: str, phase: str, swap: SwapSubject | None) -> None:
        return None

    def phase_finished(
        self, kind: str, phase: str, seconds: float, swap: SwapSubject | None
    ) -> None:
        return None

    def operation_finished(
        self, kind: str, outcome: str, seconds: float, swap: SwapSubject | None
    ) -> None:
        return None

    def admission(self, admitted: bool, reason_codes: Sequence[str]) -> None:
        return None

    def node_staging(self, node: str, outcome: str, downloaded_bytes: int) -> None:
        return None

    def alias_unavailability(self, swap: SwapSubject, seconds: Mapping[str, float]) -> None:
        return None

    def startup_steps(self, seconds: Mapping[str, float | None]) -> None:
        return None

    def fleet(self, states: Mapping[str, ModelState], aliases: Mapping[str, str]) -> None:
        return None

    def nodes(self, usage: Sequence[NodeUsage]) -> None:
        return None
