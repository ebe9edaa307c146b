"""`switchyard swap OLD SOURCE --name N`: hot-swap OLD for a new model on the same GPUs."""

from __future__ import annotations

import argparse
from typing import Any

from switchyard.commands.add import (
    add_model_arguments,
    add_strategy_argument,
    model_config,
    swap_request,
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "swap",
        help="replace a serving model by a new one on the same accelerators, rolling back "
        "on failure",
    )
    parser.add_argument("old", help="name of the serving model to replace")
    parser.add_argument("source", help="hub id[@rev], local dir or miniature:NAME")
    add_model_arguments(parser)
    add_strategy_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from switchyard.operation_runner import resolve_address, run_operation

    request = swap_request(args, args.old, model_config(args))
    address = resolve_address(args.address, args.state_dir)
    return run_operation(address, request, as_json=args.json)
