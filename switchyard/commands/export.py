"""`switchyard export`: the live fleet as a file `apply` accepts."""

from __future__ import annotations

import argparse
from typing import Any

from switchyard.commands.diff import add_connection_arguments


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "export",
        help="print the live fleet as a fleet file (each model as it was asked for)",
        description="Each model's entry as it was asked for (a fleet file's entry, `layout: "
        "auto` kept; or the flags of `add`), with the aliases it has now. `export` then "
        "`diff -f` of its output shows no changes.",
    )
    add_connection_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import ray

    from domain.exit_codes import ExitCode
    from domain.fleet_file import fleet_file_text
    from switchyard.operation_runner import connect_manager, resolve_address

    manager = connect_manager(resolve_address(args.address, args.state_dir))
    entries = ray.get(manager.export_fleet.remote())
    print(fleet_file_text(entries), end="")
    return ExitCode.OK
