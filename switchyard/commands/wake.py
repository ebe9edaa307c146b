"""`switchyard wake NAME`: bring a parked model back (admission, then its engine's start);
it waits for a change already running."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("wake", help="bring a parked model back")
    parser.add_argument("name")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--address")
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from domain.operation_request import WakeRequest
    from switchyard.commands.add import request_or_exit
    from switchyard.operation_runner import resolve_address, run_operation

    request = request_or_exit(lambda: WakeRequest(name=args.name))
    address = resolve_address(args.address, args.state_dir)
    return run_operation(address, request, as_json=args.json)
