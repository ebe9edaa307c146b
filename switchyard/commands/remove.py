"""`switchyard remove NAME`: take a model down and free its accelerators."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from domain.exit_codes import UserInputError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("remove", help="take a model down")
    parser.add_argument("name")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--address")
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from domain.deployment_config import validate_model_name
    from switchyard.fleet_client import resolve_address, run_operation

    try:
        validate_model_name(args.name)
    except ValueError as exc:
        # No such model can exist; say so without connecting to the cluster.
        raise UserInputError(str(exc)) from None
    address = resolve_address(args.address, args.state_dir)
    return run_operation(address, {"kind": "remove", "name": args.name}, as_json=args.json)
