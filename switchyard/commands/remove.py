"""`switchyard remove NAME`: take a model down and free its accelerators."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from switchyard.commands.model_command import register_model_command

if TYPE_CHECKING:
    from domain.operation_request import OperationRequest


def register(subparsers: Any) -> None:
    register_model_command(subparsers, "remove", "take a model down", _request)


def _request(name: str) -> OperationRequest:
    from domain.operation_request import RemoveRequest

    return RemoveRequest(name=name)
