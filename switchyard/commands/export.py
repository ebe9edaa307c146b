"""`switchyard export`: the live fleet as a file `apply` accepts."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from domain.exit_codes import ExitCode
from switchyard.commands.diff import add_connection_arguments

if TYPE_CHECKING:
    from cluster.clients.manager_client import ManagerApi


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
    from cluster.clients.manager_client import RayManagerClient
    from domain.fleet_file import exported_entries, fleet_file_text
    from switchyard.operation_runner import resolve_address
    from switchyard.operator_routes import local_live_fleet

    # Through the gateway when it answers (no Ray driver: well under a second), else Ray.
    live = local_live_fleet(args.address, args.state_dir)
    if live is not None:
        print(fleet_file_text(exported_entries(live.models, live.aliases)), end="")
        return ExitCode.OK
    return export(RayManagerClient.connect(resolve_address(args.address, args.state_dir)))


def export(manager: ManagerApi) -> int:
    """Print the live fleet as a fleet file."""
    from domain.fleet_file import fleet_file_text

    print(fleet_file_text(manager.export_fleet()), end="")
    return ExitCode.OK
