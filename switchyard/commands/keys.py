"""`switchyard keys reload [FILE]`: publish a keys file's tenants to every gateway replica.

Re-reads the file `up --keys` named (or FILE), resolving each `key_env` in this process's
environment, and publishes the tenants (SHA-256 of each key, never the key) through the
fleet registry; every gateway replica takes the new table within its exchange period
(`quota_sync_s`, 1 s), without a restart. A bad file publishes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domain.exit_codes import ExitCode, UserInputError

if TYPE_CHECKING:
    from cluster.clients.registry_client import RegistryApi
    from domain.tenant_keys import TenantTable


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "keys",
        help="tenant keys of the endpoint (keys reload [FILE])",
        description="Reload the endpoint's tenant keys without a restart: re-read the file "
        "`up --keys` named, or FILE, and publish it to every gateway replica.",
    )
    parser.add_argument("action", choices=("reload",))
    parser.add_argument("file", nargs="?", type=Path, default=None, metavar="FILE")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--address")
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from cluster.clients.registry_client import RayRegistryClient
    from domain.tenant_keys import read_keys_file
    from switchyard.operation_runner import resolve_address

    # A file given here is read before anything connects: a bad one changes nothing.
    table = read_keys_file(args.file, os.environ) if args.file is not None else None
    address = resolve_address(args.address, args.state_dir)
    return reload_keys(RayRegistryClient.connect(address), table, as_json=args.json)


def reload_keys(registry: RegistryApi, table: TenantTable | None, *, as_json: bool) -> int:
    """Publish `table` (or, when None, the keys file `up --keys` named, read again) to every
    gateway replica through the registry."""
    from domain.tenant_keys import KEYS_FILE_FACT, read_keys_file

    if table is None:
        named = registry.facts().get(KEYS_FILE_FACT)
        if not named:
            raise UserInputError(
                "FILE: none given, and this stack was not started with `up --keys`; "
                "pass the keys file to load"
            )
        table = read_keys_file(Path(named), os.environ)
    version = registry.set_tenants(table)
    if table.version != version:
        raise UserInputError(
            f"{table.source}: a newer tenant table ({version}) is already published; "
            "run the reload again"
        )
    names = [t.name for t in table.tenants]
    if as_json:
        print(json.dumps({"version": version, "source": table.source, "keys": names}))
    else:
        print(
            f"published {len(names)} keys from {table.source} (version {version}): "
            f"{', '.join(names) or 'none (the endpoint is open)'}; every gateway replica "
            "takes them within a second"
        )
    return ExitCode.OK
