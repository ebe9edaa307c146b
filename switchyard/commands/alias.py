"""`switchyard alias set ALIAS NAME`: point an alias (e.g. `default`) at a model."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


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
    from domain.operation_request import AliasRequest
    from switchyard.commands.add import request_or_exit
    from switchyard.operation_runner import resolve_address, run_operation

    request = request_or_exit(lambda: AliasRequest(alias=args.alias, name=args.name))
    address = resolve_address(args.address, args.state_dir)
    return run_operation(address, request, as_json=args.json)
