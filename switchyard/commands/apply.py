"""`switchyard apply -f FILE`: make the live fleet match a fleet file, step by step."""

from __future__ import annotations

import argparse
from typing import Any

from switchyard.commands.diff import add_connection_arguments, add_file_argument


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "apply",
        help="make the live fleet match a fleet file (journaled removes, swaps, adds, aliases)",
        description="Plan as `diff` does; when every step is admitted, run them one at a time "
        "as the usual operations (holds, drains, rollbacks). Stops at the first refused or "
        "rolled-back step and says what was and was not done. Exit 0 done (or nothing to "
        "do), 1 refused or stopped, 2 bad file.",
    )
    add_file_argument(parser)
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_connection_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from cluster.clients.manager_client import RayManagerClient
    from cluster.clients.registry_client import RayRegistryClient
    from switchyard.commands.diff import read_checked_fleet_file
    from switchyard.fleet_file_apply import apply_fleet, fleet_tenants
    from switchyard.operation_runner import resolve_address

    desired, sha256 = read_checked_fleet_file(args.file)
    # Resolved before anything connects: an unset key_env changes nothing.
    tenants = fleet_tenants(desired, args.file)
    address = resolve_address(args.address, args.state_dir)
    return apply_fleet(
        RayManagerClient.connect(address),
        lambda: RayRegistryClient.connect(address),
        args.file,
        desired,
        sha256,
        tenants=tenants,
        dry_run=args.dry_run,
        as_json=args.json,
    )
