"""Fleet operations, the phases of a hot swap, and what an operation reports.

The records the manager sends back to the CLI (or a `ray job`): typed, with enums, dumped
as JSON by `--json`. `SCHEMA_VERSION` versions that JSON; a key is only ever added to it.
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_serializer,
    model_serializer,
)

from domain.deployment_config import ModelDeploymentConfig
from domain.engine_capacity import ModelCapacity
from domain.exit_codes import ExitCode
from domain.fleet_file import FleetModelEntry

SCHEMA_VERSION = 1
"""Version of the operation protocol's JSON (results, events, `status --json`)."""


class OperationKind(StrEnum):
    ADD = "add"
    """Bring a new model up beside the others."""
    SWAP = "swap"
    """Replace OLD by NEW on the same accelerators; OLD's aliases move to NEW."""
    REMOVE = "remove"
    """Take a model down and free its accelerators."""
    ALIAS = "alias"
    """Point an alias at a model."""
    PARK = "park"
    """Drain a model and unload its engine, keeping its name, aliases and routes."""
    WAKE = "wake"
    """Bring a parked model back: admission, then its engine's start."""
    RESIDENCY = "residency"
    """Record a model's residency keys (a fleet file's change); nothing is redeployed."""


class SwapPhase(StrEnum):
    """Steps of a swap, journaled before each is acted on (see cluster/fleet/swap_flow.py).
    A park is `draining` then `removing_old` (or `sleeping`), a wake `preflight` then
    `deploying_new` (or `waking` alone, for a model asleep) (cluster/fleet/residency.py); an
    add `preflight` then `deploying_new`."""

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
    SLEEPING = "sleeping"
    """A park by vLLM's sleep mode: every replica of the model's engine is put to sleep;
    its app and placement stay."""
    WAKING = "waking"
    """The wake of a model asleep: every replica woken (level 2 also reloads its weights)
    and warmed, under the same app generation."""


class SwapStrategy(StrEnum):
    """How a swap moves traffic from OLD to NEW."""

    AUTO = "auto"
    """Make-before-break when NEW fits beside OLD on accelerators free now, else
    break-before-make. Only ever asked for: a swap runs, and reports, a resolved one."""
    MAKE_BEFORE_BREAK = "make-before-break"
    """NEW is deployed and warmed beside OLD, the aliases move in one registry update
    (in-flight requests finish on OLD), then OLD is drained and removed. Nothing is held."""
    BREAK_BEFORE_MAKE = "break-before-make"
    """OLD's aliases are held while OLD is drained and removed and NEW starts on the
    accelerators OLD freed; held requests are answered by NEW."""


class Outcome(StrEnum):
    DONE = "done"
    """The change was made."""
    REJECTED = "rejected"
    """Refused before anything changed (admission, a name clash, another change running)."""
    ROLLED_BACK = "rolled_back"
    """NEW failed to start; OLD serves (again, after a break-before-make drain; untouched
    by a make-before-break swap)."""
    FAILED = "failed"
    """The change failed and could not be undone completely; the message says what is left."""

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self is Outcome.DONE else ExitCode.REJECTED


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OperationEvent(_Record):
    """One progress line of an operation; `seconds` is set on a phase's closing event."""

    at: float
    phase: str
    message: str
    seconds: float | None = None


class AdmissionSummary(_Record):
    """What admission decided, as the result and the journal record it."""

    admitted: bool
    reasons: list[str] = Field(default_factory=list)
    layout: str
    candidate_reasons: list[str] = Field(default_factory=list)
    kv_source: str | None = None
    """Where the judged layout's KV capacity came from: `model` or `observed`
    (policies.admission.KvSource)."""


class OperationDetails(BaseModel):
    """What an operation is about. Only the keys an operation sets appear in its JSON."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    """The model added, removed, aliased, parked or woken."""
    alias: str | None = None
    old: str | None = None
    """The model a swap replaces."""
    new: str | None = None
    """The model a swap brings up."""
    source: str | None = None
    layout: str | None = None
    dry_run: bool | None = None
    generation: int | None = None
    """The Serve app generation the new deployment gets (domain/app_name.py)."""
    strategy: SwapStrategy | None = None
    """A swap's resolved strategy, journaled once decided (a restart finishes it by it)."""
    strategy_reason: str | None = None
    startup_steps: dict[str, float | None] | None = None
    """Where the new deployment's start went (cluster/fleet/startup_steps.py; None: not shown)."""
    alias_unavailable_s: dict[str, float] | None = None
    """Per alias a swap moved: how long it had no model serving it (0: never held)."""
    new_config: ModelDeploymentConfig | None = None
    """All of NEW's config, journaled: a restart that completes a swap records NEW as it
    was requested (engine settings included), not a copy of OLD."""
    new_entry: FleetModelEntry | None = None
    """NEW as it was asked for (its fleet-file entry), stored with it by a completed swap."""

    @field_serializer("new_entry")
    def _entry_as_written(self, entry: FleetModelEntry | None) -> dict[str, Any] | None:
        return None if entry is None else entry.model_dump(mode="json", exclude_unset=True)

    admission: AdmissionSummary | None = None
    weights: dict[str, Any] | None = None
    """A dry run's weight sizes and per-node disk verdicts."""
    park_reason: str | None = None
    """Why a park parks (domain/residency.py ParkReason: manual, idle, evicted)."""
    trigger: str | None = None
    """What asked for a wake (domain/operation_request.py WakeTrigger: manual, request)."""
    evicted: list[str] | None = None
    """The on-demand models a wake parks to make room (least recently used first),
    journaled before the first is touched."""
    predicted_capacity: ModelCapacity | None = None
    """What admission predicted for the deployment it admitted (and that deployment's
    `CapacityKey`): the engine's logged figures join it once it has started."""

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {k: v for k, v in dumped.items() if v is not None}


class OperationResult(_Record):
    """How an operation ended, with its progress events and each phase's duration."""

    schema_version: int = SCHEMA_VERSION
    op_id: str
    kind: OperationKind
    outcome: Outcome
    message: str
    phase_seconds: dict[str, float] = Field(default_factory=dict)
    events: list[OperationEvent] = Field(default_factory=list)
    details: OperationDetails = Field(default_factory=OperationDetails)
    strategy: SwapStrategy | None = None
    """A swap's resolved strategy (never `auto`); None for other operations and for a swap
    refused before it was decided."""
    strategy_reason: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.outcome is Outcome.DONE


class SwapSummary(_Record):
    """The latest swap, as `status` shows it."""

    op_id: str
    old: str
    new: str
    strategy: SwapStrategy | None
    outcome: Outcome
    ended_at: float
    """Unix time."""
    phase_seconds: dict[str, float]
    alias_unavailable_s: dict[str, float]

    @classmethod
    def of(cls, result: OperationResult, ended_at: float) -> SwapSummary:
        return cls(
            op_id=result.op_id,
            old=result.details.old or "",
            new=result.details.new or "",
            strategy=result.strategy,
            outcome=result.outcome,
            ended_at=ended_at,
            phase_seconds=result.phase_seconds,
            alias_unavailable_s=result.details.alias_unavailable_s or {},
        )


class RunningOperation(_Record):
    """The operation in progress, as `status` and a second CLI see it."""

    op_id: str
    kind: OperationKind
    details: OperationDetails
    events: list[OperationEvent]


def now() -> float:
    return time.time()
