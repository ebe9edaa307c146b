"""The commands that name one model and ask the manager for one change to it: `remove`,
`park`, `wake`. Each registers through `register_model_command`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from domain.operation_request import OperationRequest


def register_model_command(
    subparsers: Any,
    command: str,
    help_text: str,
    make_request: Callable[[str], OperationRequest],
) -> None:
    parser = subparsers.add_parser(command, help=help_text)
    parser.add_argument("name")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--address")
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.set_defaults(handler=lambda args: _run(args, make_request))


def _run(args: argparse.Namespace, make_request: Callable[[str], OperationRequest]) -> int:
    from switchyard.commands.add import request_or_exit
    from switchyard.operation_runner import resolve_address, run_operation

    # A name no model can have is refused without connecting to the cluster.
    request = request_or_exit(lambda: make_request(args.name))
    address = resolve_address(args.address, args.state_dir)
    return run_operation(address, request, as_json=args.json)
