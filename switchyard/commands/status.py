"""`switchyard status`: endpoint, models (name, aliases, state, layout, source, replicas)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from switchyard.exit_codes import ExitCode, UserInputError

# Ray writes the Prometheus service-discovery file for every node's metrics agent here.
RAY_PROMETHEUS_SD_FILE = "/tmp/ray/prom_metrics_service_discovery.json"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("status", help="show the endpoint and the models it serves")
    parser.add_argument("--address", help="Ray cluster address (default: the one `up` used)")
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def collect(address: str) -> dict[str, Any]:
    import ray

    from cluster.ray_runtime import connect
    from cluster.registry import registry_actor

    connect(address)
    try:
        registry = registry_actor(create=False)
    except ValueError:
        raise UserInputError(f"no Switchyard stack runs on {address} (no registry actor)") from None
    table, facts = ray.get([registry.table.remote(), registry.facts.remote()])
    models = [
        {
            "name": r.name,
            "aliases": list(table.aliases_of(r.name)),
            "state": r.state.value,
            "layout": r.layout,
            "source": r.source,
            "replicas": r.replicas,
            "error": r.error,
        }
        for r in table.live_models()
    ]
    return {
        "address": address,
        "endpoint": facts.get("endpoint"),
        "dashboard_url": facts.get("dashboard_url"),
        "routing_table_version": table.version,
        "models": models,
        "aliases": dict(table.aliases),
        "metrics": {"prometheus_service_discovery_file": RAY_PROMETHEUS_SD_FILE},
    }


def run(args: argparse.Namespace) -> int:
    from switchyard.stack import read_stack_info
    from switchyard.stack_config import default_state_dir

    state_dir = args.state_dir or default_state_dir()
    info = read_stack_info(state_dir)
    address = args.address or (info.address if info else None)
    if address is None:
        raise UserInputError(f"--address: none given and no stack recorded in {state_dir}")
    status = collect(address)
    if args.json:
        print(json.dumps(status, indent=2))
        return ExitCode.OK
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"endpoint: {status['endpoint']}/v1   ray: {address}   dashboard: {status['dashboard_url']}"
    )
    table = Table("model", "aliases", "state", "layout", "replicas", "source")
    for m in status["models"]:
        table.add_row(
            m["name"],
            ", ".join(m["aliases"]),
            m["state"],
            m["layout"],
            str(m["replicas"]),
            m["source"],
        )
    console.print(table)
    console.print(f"metrics: Prometheus service discovery file {RAY_PROMETHEUS_SD_FILE}")
    return ExitCode.OK
