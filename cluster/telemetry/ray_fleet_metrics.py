"""The fleet manager's metrics in Ray's metrics pipeline: `FleetMetrics` on Ray's instruments.

Created inside the manager actor (Ray metrics belong to the process that records them); the
fleet core sees only the `FleetMetrics` protocol (cluster/fleet/fleet_metrics.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cluster.fleet.fleet_metrics import ADMITTED_REASON, NodeUsage, SwapSubject
from domain.metric_names import (
    ACCELERATORS_CLAIMED,
    ACCELERATORS_TOTAL,
    ADMISSION_DECISIONS,
    ALIAS_TARGET,
    DISK_FREE_BYTES,
    KV_PREDICTION_RATIO,
    LAST_SWAP_ALIAS_UNAVAILABLE_SECONDS,
    LAST_SWAP_PHASE_SECONDS,
    MODEL_STATE,
    NODE_STAGED_DOWNLOAD_BYTES,
    NODE_STAGINGS,
    OPERATION_SECONDS,
    OPERATIONS,
    PARKS,
    PHASE_SECONDS,
    STAGED_BYTES,
    STARTUP_STEP_SECONDS,
    SWAP_IN_PROGRESS,
    WAKE_MEASURED_SECONDS,
    WAKE_PREDICTED_SECONDS,
    WAKE_SECONDS,
    WAKES,
    MetricSpec,
)
from domain.model_state import ModelState
from serve_apps.gateway.gateway_metrics import ray_metric


class _Gauges:
    """A gauge whose current label sets are re-sent on every `refresh`: Ray forgets a gauge
    value that is not set again within two export intervals. A label set dropped here
    disappears from Prometheus shortly after, which is how a removed model leaves."""

    def __init__(self, spec: MetricSpec, instrument: Callable[[MetricSpec], Any]) -> None:
        self._gauge = instrument(spec)
        self.values: dict[tuple[tuple[str, str], ...], float] = {}

    def set(self, value: float, tags: Mapping[str, str]) -> None:
        key = tuple(sorted(tags.items()))
        self.values[key] = value
        self._gauge.set(value, dict(key))

    def replace(self, values: Mapping[tuple[tuple[str, str], ...], float]) -> None:
        self.values = dict(values)
        self.refresh()

    def refresh(self) -> None:
        for key, value in self.values.items():
            self._gauge.set(value, dict(key))


class RayFleetMetrics:
    """Records into Ray's metrics pipeline; create it inside the manager actor.

    `instrument` makes one instrument per spec (Ray's by default); every gauge goes through
    `_Gauges`, so `refresh` keeps each one Prometheus has seen alive."""

    def __init__(self, instrument: Callable[[MetricSpec], Any] = ray_metric) -> None:
        self._operations = instrument(OPERATIONS)
        self._operation_seconds = instrument(OPERATION_SECONDS)
        self._phase_seconds = instrument(PHASE_SECONDS)
        self._startup_steps = instrument(STARTUP_STEP_SECONDS)
        self._wakes = instrument(WAKES)
        self._wake_seconds = instrument(WAKE_SECONDS)
        self._wake_predicted = _Gauges(WAKE_PREDICTED_SECONDS, instrument)
        self._wake_measured = _Gauges(WAKE_MEASURED_SECONDS, instrument)
        self._parks = instrument(PARKS)
        self._admissions = instrument(ADMISSION_DECISIONS)
        self._node_stagings = instrument(NODE_STAGINGS)
        self._node_download_bytes = _Gauges(NODE_STAGED_DOWNLOAD_BYTES, instrument)
        self._model_state = _Gauges(MODEL_STATE, instrument)
        self._alias_target = _Gauges(ALIAS_TARGET, instrument)
        self._last_swap = _Gauges(LAST_SWAP_PHASE_SECONDS, instrument)
        self._unavailable = _Gauges(LAST_SWAP_ALIAS_UNAVAILABLE_SECONDS, instrument)
        self._in_progress = _Gauges(SWAP_IN_PROGRESS, instrument)
        self._accelerators = _Gauges(ACCELERATORS_TOTAL, instrument)
        self._claimed = _Gauges(ACCELERATORS_CLAIMED, instrument)
        self._staged = _Gauges(STAGED_BYTES, instrument)
        self._disk_free = _Gauges(DISK_FREE_BYTES, instrument)
        self._kv_ratio = _Gauges(KV_PREDICTION_RATIO, instrument)
        self._gauges = (
            self._kv_ratio,
            self._node_download_bytes,
            self._model_state,
            self._alias_target,
            self._last_swap,
            self._unavailable,
            self._in_progress,
            self._accelerators,
            self._claimed,
            self._staged,
            self._disk_free,
            self._wake_predicted,
            self._wake_measured,
        )

    def phase_started(self, kind: str, phase: str, swap: SwapSubject | None) -> None:
        if swap is None:
            return
        if phase == "preflight":
            # A new swap: the previous one's phase durations give way to this one's.
            self._last_swap.replace({})
        # Every other phase of this swap reads 0, so only the running one shows.
        values = {key: 0.0 for key in self._in_progress.values}
        values[_tags(old=swap.old, new=swap.new, strategy=swap.strategy, phase=phase)] = 1.0
        self._in_progress.replace(values)

    def phase_finished(
        self, kind: str, phase: str, seconds: float, swap: SwapSubject | None
    ) -> None:
        self._phase_seconds.observe(seconds, {"kind": kind, "phase": phase})
        if swap is not None:
            tags = {"old": swap.old, "new": swap.new, "strategy": swap.strategy, "phase": phase}
            self._last_swap.set(seconds, tags)

    def operation_finished(
        self, kind: str, outcome: str, seconds: float, swap: SwapSubject | None
    ) -> None:
        self._operations.inc(1, {"kind": kind, "outcome": outcome})
        self._operation_seconds.observe(seconds, {"kind": kind, "outcome": outcome})
        if swap is not None:
            # Read 0 at once, then stop re-sending: Ray lets the finished swap's series go.
            self._in_progress.replace({key: 0.0 for key in self._in_progress.values})
            self._in_progress.values = {}

    def parked(self, model: str, reason: str) -> None:
        self._parks.inc(1, {"model": model, "reason": reason})

    def woken(
        self, model: str, park_mode: str, trigger: str, outcome: str, seconds: float | None
    ) -> None:
        tags = {"model": model, "park_mode": park_mode}
        self._wakes.inc(1, {**tags, "trigger": trigger, "outcome": outcome})
        if seconds is not None:
            self._wake_seconds.observe(seconds, tags)

    def wake_predicted(self, model: str, path: str, predicted_s: float, measured_s: float) -> None:
        tags = {"model": model, "path": path}
        self._wake_predicted.set(predicted_s, tags)
        self._wake_measured.set(measured_s, tags)

    def startup_steps(self, seconds: Mapping[str, float | None]) -> None:
        for step, value in seconds.items():
            if value is not None:
                self._startup_steps.observe(value, {"step": step})

    def alias_unavailability(self, swap: SwapSubject, seconds: Mapping[str, float]) -> None:
        # Only the latest swap's figures: the previous swap's aliases give way.
        self._unavailable.replace(
            {
                _tags(alias=alias, old=swap.old, new=swap.new, strategy=swap.strategy): value
                for alias, value in seconds.items()
            }
        )

    def admission(self, admitted: bool, reason_codes: Sequence[str]) -> None:
        result = "admitted" if admitted else "rejected"
        for code in reason_codes or (ADMITTED_REASON,):
            self._admissions.inc(1, {"result": result, "reason": code})

    def node_staging(self, node: str, outcome: str, downloaded_bytes: int) -> None:
        self._node_stagings.inc(1, {"node": node, "outcome": outcome})
        # A gauge, not a counter: it is set (to 0 too) on every staging, so each node that
        # ever staged has a series, miniature and reused weights included; re-sent on every
        # refresh like the others, or Ray forgets it two export intervals after the staging.
        self._node_download_bytes.set(downloaded_bytes, {"node": node})

    def fleet(self, states: Mapping[str, ModelState], aliases: Mapping[str, str]) -> None:
        self._model_state.replace(
            {
                _tags(model=name, state=state.value): float(state == current)
                for name, current in states.items()
                for state in ModelState
            }
        )
        self._alias_target.replace(
            {_tags(alias=alias, model=model): 1.0 for alias, model in aliases.items()}
        )

    def nodes(self, usage: Sequence[NodeUsage]) -> None:
        self._accelerators.replace({_tags(node=u.node): float(u.accelerators) for u in usage})
        self._claimed.replace({_tags(node=u.node): float(u.accelerators_claimed) for u in usage})
        self._staged.replace(
            {_tags(node=u.node): float(u.staged_bytes) for u in usage if u.staged_bytes is not None}
        )
        self._disk_free.replace(
            {
                _tags(node=u.node): float(u.disk_free_bytes)
                for u in usage
                if u.disk_free_bytes is not None
            }
        )

    def kv_prediction(self, ratios: Mapping[str, float]) -> None:
        self._kv_ratio.replace({_tags(model=name): ratio for name, ratio in ratios.items()})

    def refresh(self) -> None:
        for gauge in self._gauges:
            gauge.refresh()


def _tags(**tags: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(tags.items()))
