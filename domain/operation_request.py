"""What the CLI (or a `ray job`) asks the fleet manager to do: one typed request per kind.

Built and validated on the caller's side, before anything touches the cluster; the manager
fills in what the cluster decides (the accelerator kind) for fields the caller left unset.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from domain.deployment_config import ModelDeploymentConfig, validate_model_name
from domain.fleet_file import FleetModelEntry
from domain.operation import OperationKind, SwapStrategy


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AddRequest(_Request):
    kind: Literal[OperationKind.ADD] = OperationKind.ADD
    config: ModelDeploymentConfig
    dry_run: bool = False
    entry: FleetModelEntry | None = None
    """The fleet-file entry `config` comes from (`apply`): stored with the model, and its
    `layout: auto` resolved by admission. None: made from `config` (`add`'s flags)."""


class SwapRequest(_Request):
    kind: Literal[OperationKind.SWAP] = OperationKind.SWAP
    old: str
    """The serving model to replace; its aliases move to `config.name`."""
    config: ModelDeploymentConfig
    dry_run: bool = False
    strategy: SwapStrategy = SwapStrategy.AUTO
    prefetch_weights: bool = True
    """Break-before-make: read NEW's weight files into the page cache before the drain,
    when the node's available memory covers them, so the load inside the hold is faster."""
    deploy_early: bool = True
    """Break-before-make: deploy NEW's app before OLD's is deleted, so its replica is waiting
    for the accelerators and starts the moment OLD's are freed."""
    entry: FleetModelEntry | None = None
    """As for AddRequest. `old` may be `config.name` itself: the same model redeployed with a
    new source, layout, engine settings or replicas, under the next app generation."""

    @field_validator("old")
    @classmethod
    def _old(cls, value: str) -> str:
        return validate_model_name(value, "old")


class _NamedRequest(_Request):
    """A change to one model, named."""

    name: str

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return validate_model_name(value)


class RemoveRequest(_NamedRequest):
    kind: Literal[OperationKind.REMOVE] = OperationKind.REMOVE


class AliasRequest(_Request):
    kind: Literal[OperationKind.ALIAS] = OperationKind.ALIAS
    alias: str
    name: str

    @field_validator("alias")
    @classmethod
    def _alias(cls, value: str) -> str:
        return validate_model_name(value, "alias")


class ParkRequest(_NamedRequest):
    kind: Literal[OperationKind.PARK] = OperationKind.PARK


class WakeTrigger(StrEnum):
    """What asked for a wake."""

    MANUAL = "manual"
    """`switchyard wake` (or its Ray job)."""
    REQUEST = "request"
    """A client's request for the parked model, held at a gateway."""


class WakeRequest(_NamedRequest):
    kind: Literal[OperationKind.WAKE] = OperationKind.WAKE
    trigger: WakeTrigger = WakeTrigger.MANUAL


class ResidencyRequest(_NamedRequest):
    """A live model's residency keys changed in a fleet file (its deployment did not)."""

    kind: Literal[OperationKind.RESIDENCY] = OperationKind.RESIDENCY
    entry: FleetModelEntry


OperationRequest = Annotated[
    AddRequest
    | SwapRequest
    | RemoveRequest
    | AliasRequest
    | ParkRequest
    | WakeRequest
    | ResidencyRequest,
    Field(discriminator="kind"),
]
"""Any request; `kind` says which."""

REQUEST_ADAPTER: TypeAdapter[OperationRequest] = TypeAdapter(OperationRequest)
