"""`switchyard swap OLD SOURCE --name N`: hot-swap OLD for a new model on the same GPUs."""

from __future__ import annotations

import argparse
from typing import Any

from switchyard.commands.add import (
    add_model_arguments,
    add_strategy_argument,
    model_config,
    request_or_exit,
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
    from domain.operation_request import SwapRequest
    from switchyard.fleet_client import resolve_address, run_operation

    config = model_config(args)
    request = request_or_exit(
        lambda: SwapRequest(
            old=args.old,
            config=config,
            dry_run=args.dry_run,
            strategy=args.strategy,
            prefetch_weights=args.prefetch_weights,
            deploy_early=args.deploy_early,
        )
    )
    address = resolve_address(args.address, args.state_dir)
    return run_operation(address, request, as_json=args.json)
