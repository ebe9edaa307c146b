"""`switchyard alias set ALIAS NAME`: point an alias (e.g. `default`) at a model."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from domain.exit_codes import UserInputError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("alias", help="manage aliases (alias set ALIAS NAME)")
    parser.add_argument("action", choices=("set",))
    parser.add_argument("alias")
    parser.add_argument("name")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--address")
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from domain.deployment_config import validate_model_name
    from switchyard.fleet_client import resolve_address, run_operation

    try:
        validate_model_name(args.alias, "alias")
    except ValueError as exc:
        raise UserInputError(str(exc)) from None
    address = resolve_address(args.address, args.state_dir)
    request = {"kind": "alias", "alias": args.alias, "name": args.name}
    return run_operation(address, request, as_json=args.json)
