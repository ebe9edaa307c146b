"""`switchyard diff -f FILE`: the steps from the live fleet (or OLD.yaml) to a fleet file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from domain.exit_codes import ExitCode, UserInputError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "diff",
        help="show what `apply -f FILE` would change, each step with its admission verdict",
        description="The plan from the live fleet to FILE: removes, swaps, adds, alias moves, "
        "each judged by admission as the steps before it leave the cluster. With --from OLD "
        "and --inventory, compare two files on a described cluster with no cluster running. "
        "Exit 0 plan made, 1 some step would be refused, 2 bad file or no fleet.",
    )
    add_file_argument(parser)
    parser.add_argument("--from", dest="from_file", type=Path, metavar="OLD", help="compare OLD")
    parser.add_argument(
        "--inventory",
        type=Path,
        metavar="FILE",
        help="the described cluster --from is judged on (see docs/fleet-file.md)",
    )
    parser.add_argument("--json", action="store_true", help='print {"changes": [...], ...}')
    add_connection_arguments(parser)
    parser.set_defaults(handler=run)


def add_file_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f", "--file", required=True, type=Path, metavar="FILE", help="the fleet file"
    )


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--address", help="Ray address (default: $RAY_ADDRESS or `up`'s)")
    parser.add_argument("--state-dir", type=Path, default=None)


def run(args: argparse.Namespace) -> int:
    desired, _ = read_checked_fleet_file(args.file)
    if args.from_file is not None or args.inventory is not None:
        plan = _offline_plan(args, desired)
    else:
        plan = live_plan(args.address, args.state_dir, desired)
    print_plan(plan, as_json=args.json)
    return ExitCode.OK if plan["admitted"] else ExitCode.REJECTED


def read_checked_fleet_file(path: Path) -> tuple[Any, str]:
    """The fleet file at `path`, validated by its model and against the installed vLLM
    (parser names, `engine.extra`); and its sha256. A bad one exits 2, changing nothing."""
    from domain.fleet_file import read_fleet_file
    from switchyard.engine_args import check_fleet_engines

    desired, sha256 = read_fleet_file(path)
    check_fleet_engines(desired.models, str(path))
    return desired, sha256


def live_plan(address: str | None, state_dir: Path | None, desired: Any) -> dict[str, Any]:
    """The manager's judged plan from the live fleet to `desired`, as JSON.

    A file that changes nothing is answered from the gateway's fleet route without joining
    the cluster (the seconds a Ray driver takes to connect), when no model is on demand:
    an empty plan judges nothing, but a fleet with on-demand models also reports the pairs
    that can never be resident together, which takes the manager's admission."""
    from cluster.clients.manager_client import RayManagerClient
    from cluster.fleet.fleet_plan import FleetPlan
    from domain.fleet_file_diff import diff_fleet
    from switchyard.operation_runner import resolve_address
    from switchyard.operator_routes import local_live_fleet

    live = local_live_fleet(address, state_dir)
    if live is not None:
        diff = diff_fleet(live.models, live.aliases, desired)
        if not diff.changes and not live.on_demand:
            return FleetPlan(steps=(), left_aliases=diff.left_aliases).to_json()
    manager = RayManagerClient.connect(resolve_address(address, state_dir))
    return manager.plan_fleet(desired).to_json()


def print_plan(plan: dict[str, Any], *, as_json: bool) -> None:
    from switchyard.fleet_file_report import plan_lines

    if as_json:
        print(json.dumps(plan, indent=2))
    else:
        print("\n".join(plan_lines(plan)))


def _offline_plan(args: argparse.Namespace, desired: Any) -> dict[str, Any]:
    from cluster.fleet.fleet_plan import PlanSources, deploy_all, plan_fleet
    from cluster.fleet.manager_settings import ManagerSettings
    from cluster.inventory.described_cluster import read_described_cluster
    from cluster.ray_adapters.ray_nodes import RayNodes
    from domain.fleet_file_diff import diff_fleet
    from switchyard.stack_config import default_state_dir

    if args.from_file is None or args.inventory is None:
        raise UserInputError(
            "--from and --inventory go together: a file is compared with another on a "
            "described cluster; without both, diff compares with the live fleet"
        )
    old, _ = read_checked_fleet_file(args.from_file)
    cluster = read_described_cluster(args.inventory)
    # Config files only (hub ids: config.json and the weight index); miniatures are
    # generated into the local cache as `miniature` would.
    nodes = RayNodes(ManagerSettings(state_dir=args.state_dir or default_state_dir()))
    sources = PlanSources(
        model_dir=nodes.read_config,
        inventory=cluster.inventory(),
        accelerator=cluster.accelerator_config(),
    )
    described = deploy_all(old.models, sources)
    if described.problems:
        raise UserInputError(
            f"--from {args.from_file}: it does not fit the described cluster itself: "
            + "; ".join(described.problems)
        )
    live, aliases = described.live, described.aliases
    entries = {name: model.entry for name, model in live.items()}
    diff = diff_fleet(entries, aliases, desired)
    plan = plan_fleet(diff, live, aliases, described.sources)
    result: dict[str, Any] = plan.to_json()
    return result
