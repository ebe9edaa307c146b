"""`switchyard park NAME`: drain a model and unload its engine, freeing its accelerators;
its name, aliases and routes stay (`switchyard wake NAME` brings it back)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "park", help="unload a model's engine, keeping its name, aliases and routes"
    )
    parser.add_argument("name")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--address")
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from domain.operation_request import ParkRequest
    from switchyard.commands.add import request_or_exit
    from switchyard.operation_runner import resolve_address, run_operation

    # A name no model can have is refused without connecting to the cluster.
    request = request_or_exit(lambda: ParkRequest(name=args.name))
    address = resolve_address(args.address, args.state_dir)
    return run_operation(address, request, as_json=args.json)
