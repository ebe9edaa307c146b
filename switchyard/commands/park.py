"""`switchyard park NAME`: drain a model and unload its engine, freeing its accelerators;
its name, aliases and routes stay (`switchyard wake NAME`, or a request for it, brings it
back)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from switchyard.commands.model_command import register_model_command

if TYPE_CHECKING:
    from domain.operation_request import OperationRequest


def register(subparsers: Any) -> None:
    register_model_command(
        subparsers,
        "park",
        "unload a model's engine, keeping its name, aliases and routes",
        _request,
    )


def _request(name: str) -> OperationRequest:
    from domain.operation_request import ParkRequest

    return ParkRequest(name=name)
