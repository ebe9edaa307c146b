"""`switchyard wake NAME`: bring a parked model back (admission, then its engine's start,
parking on-demand models to make room); it waits for a change already running."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from switchyard.commands.model_command import register_model_command

if TYPE_CHECKING:
    from domain.operation_request import OperationRequest


def register(subparsers: Any) -> None:
    register_model_command(subparsers, "wake", "bring a parked model back", _request)


def _request(name: str) -> OperationRequest:
    from domain.operation_request import WakeRequest

    return WakeRequest(name=name)
