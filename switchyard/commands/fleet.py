"""`switchyard fleet schema`: the fleet file's JSON Schema."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("fleet", help="the fleet file format (fleet schema)")
    parser.add_argument("action", choices=("schema",), help="schema: print its JSON Schema")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from domain.exit_codes import ExitCode
    from domain.fleet_file import FleetFile

    print(json.dumps(FleetFile.model_json_schema(), indent=2))
    return ExitCode.OK
