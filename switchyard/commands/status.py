"""`switchyard status`: endpoint, models (name, aliases, state, layout, source, replicas)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from domain.exit_codes import EndpointUnreachable, ExitCode, HeadUnavailable, UserInputError

if TYPE_CHECKING:
    from cluster.clients.manager_client import ManagerApi
    from cluster.clients.registry_client import RegistryApi
    from domain.status_report import HeadStatus, MetricsStatus, StatusReport


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("status", help="show the endpoint and the models it serves")
    parser.add_argument("--address", help="Ray cluster address (default: the one `up` used)")
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--prometheus",
        default=None,
        metavar="URL",
        help="read tok/s and TTFT from this Prometheus (default: the one `switchyard metrics "
        "prometheus` runs, else the fleet manager's own samples of the gateways' counters)",
    )
    parser.add_argument(
        "--window-s",
        type=float,
        default=0.0,
        help="instead of the manager's samples, scrape Ray's metrics agents twice this many "
        "seconds apart and report the rates between (Ray exports every 10 s; default 0: "
        "no waiting)",
    )
    parser.add_argument(
        "--url",
        default=None,
        metavar="URL",
        help="read a stack's status from its endpoint (e.g. https://host:8000) through "
        "GET /switchyard/v1/status, from any machine: no Ray node needed",
    )
    parser.add_argument(
        "--admin-key-env",
        default=None,
        metavar="NAME",
        help="the environment variable holding the operator key the route asks for "
        "(default: the one `up --admin-key-env` named, else SWITCHYARD_ADMIN_KEY)",
    )
    parser.add_argument(
        "--cacert",
        default=None,
        metavar="FILE",
        help="trust this certificate for an HTTPS endpoint (default: the one `up --tls-cert` "
        "read, locally; else the system's)",
    )
    parser.add_argument(
        "--via",
        choices=("auto", "gateway", "ray"),
        default="auto",
        help="how a local `status` reads the stack: the gateway's route (no Ray driver, well "
        "under a second), Ray (the registry and manager actors; the inventory probed now), or "
        "auto: the route when it answers, else Ray (default)",
    )
    parser.set_defaults(handler=run)


def collect(address: str) -> StatusReport:
    """Join the cluster at `address` and read the status from its registry and manager."""
    from cluster.clients.manager_client import RayManagerClient
    from cluster.clients.registry_client import RayRegistryClient

    registry = RayRegistryClient.connect(address)
    return status_report(address, registry, RayManagerClient.find())


def status_report(address: str, registry: RegistryApi, manager: ManagerApi | None) -> StatusReport:
    """The status document from the registry's view and, when a manager runs, the manager's
    (its inventory probed now)."""
    import time

    from serve_apps.registry.status_document import status_report as assemble

    seen = registry.view()
    return assemble(
        address=address,
        table=seen.table,
        facts=seen.facts,
        tenants=seen.tenants,
        tenant_usage=seen.tenant_usage,
        manager=None if manager is None else manager.status(),
        endpoints=registry.ingress_endpoints(seen.facts),
        now=time.time(),
    )


def _add_live_metrics(status: StatusReport, state_dir: Path, args: argparse.Namespace) -> None:
    """Current tok/s and p95 TTFT per model, into `metrics` and each model's entry: from a
    Prometheus, else the manager's samples the document carries, else (`--window-s`) the
    metrics agents."""
    from cluster.telemetry.live_stats_sampler import MANAGER_SOURCE
    from switchyard.observability.status_metrics import live_metrics

    if not 0 <= args.window_s <= 600:
        raise UserInputError(f"--window-s: {args.window_s:g} is not in 0-600")
    sampled = status.metrics if status.metrics.source == MANAGER_SOURCE else None
    status.metrics = live_metrics(state_dir, args.prometheus, args.window_s, lambda: sampled)
    by_model = {m.model: m for m in status.metrics.models}
    for model in status.models:
        stats = by_model.get(model.name)
        model.generated_tok_s = stats.generated_tok_s if stats else None
        model.ttft_p95_s = stats.ttft_p95_s if stats else None


def run(args: argparse.Namespace) -> int:
    from switchyard.stack import read_stack_info
    from switchyard.stack_config import default_state_dir

    state_dir = args.state_dir or default_state_dir()
    document = sys.stdout
    if args.url is not None:
        if args.address is not None or args.via == "ray":
            raise UserInputError(
                "--url: reads through the endpoint; --address and --via ray join the cluster "
                "with Ray instead (give one or the other)"
            )
        status = _from_url(args)
        address = status.address
    else:
        info = read_stack_info(state_dir)
        given: str | None = args.address or (info.address if info else None)
        if given is None:
            raise UserInputError(f"--address: none given and no stack recorded in {state_dir}")
        address = given
        head = _head_status(state_dir, info)
        status_or_none = _local_status(args, address)
        if status_or_none is None:
            if args.json:
                # Ray's driver prints cluster error events (e.g. "(raylet) The node ... died")
                # to whatever sys.stdout is when they arrive, until the process exits; stdout
                # must carry the JSON document only, so everything else goes to stderr.
                sys.stdout = sys.stderr
            try:
                status_or_none = collect(address)
            except HeadUnavailable:
                _print_unavailable(address, head, document, as_json=args.json)
                raise
        status = status_or_none
        status.head = head
    if args.url is None or args.prometheus is not None:
        # A remote stack's document carries its manager's samples; this machine's state
        # directory knows nothing of its Prometheus or its metrics agents.
        _add_live_metrics(status, state_dir, args)
    if args.json:
        document.write(json.dumps(status.model_dump(mode="json"), indent=2) + "\n")
        document.flush()
        return ExitCode.OK
    from rich.console import Console

    from switchyard.status_table import MODEL_COLUMNS, model_rows, print_table_or_blocks

    console = Console()
    console.print(
        f"endpoint: {status.endpoint}/v1   ray: {address}   dashboard: {status.dashboard_url}"
    )
    if len(status.endpoints) > 1:
        console.print(
            "ingress endpoints: "
            + "; ".join(
                f"{e.url} ({'head' if e.head else 'node ' + e.node}, "
                f"{'alive' if e.alive else 'node lost'}, "
                f"{'-' if e.running_replicas is None else e.running_replicas} gateway replicas)"
                for e in status.endpoints
            )
        )
    print_table_or_blocks(console, MODEL_COLUMNS, model_rows(status.models))
    on_demand = [m for m in status.models if m.residency == "on_demand"]
    woken = [m for m in status.models if m.last_wake_s is not None]
    if on_demand or woken:
        console.print(
            "residency: "
            + "; ".join(
                f"{m.name} {m.residency or '-'} ({m.park_mode or '-'}"
                + (f", last wake {m.last_wake_s:.1f} s" if m.last_wake_s is not None else "")
                + ")"
                for m in status.models
                if m in on_demand or m in woken
            )
        )
    metrics = status.metrics
    console.print(
        f"metrics: Prometheus service discovery file {metrics.prometheus_service_discovery_file}"
        f"; live figures from {_source_text(metrics)}"
    )
    if status.last_swap is not None:
        swap = status.last_swap
        unavailable = ", ".join(
            f"{alias} {seconds:.1f} s" for alias, seconds in swap.alias_unavailable_s.items()
        )
        strategy = swap.strategy.value if swap.strategy else "-"
        console.print(
            f"last swap: {swap.old} -> {swap.new} ({strategy}, {swap.outcome.value}); "
            f"aliases without a model: {unavailable or '-'}"
        )
    if status.tenants is not None:
        tenants = status.tenants
        top = ", ".join(
            f"{u.name} {u.requests} req / {u.tokens} tok"
            + (f" ({u.rejections} refused)" if u.rejections else "")
            for u in tenants.top
        )
        console.print(f"keys: {tenants.keys} from {tenants.source}; top users (60 s): {top or '-'}")
    if status.operation is not None:
        console.print(
            f"running: {status.operation.kind.value} {status.operation.op_id}: "
            + (status.operation.events[-1].message if status.operation.events else "starting")
        )
    if status.head is not None and status.head.fault_tolerant:
        console.print(_head_line(status.head))
    _print_inventory(console, status.inventory)
    return ExitCode.OK


def _from_url(args: argparse.Namespace) -> StatusReport:
    """The document from a remote endpoint's route; a refusal or a silent endpoint is an
    error here (there is no Ray to fall back on)."""
    from switchyard.operator_routes import OperatorRoutes, RouteUnavailable, operator_key

    if args.window_s:
        raise UserInputError(
            "--window-s: scrapes Ray's metrics agents from this machine; with --url the live "
            "figures are the manager's samples (or --prometheus URL)"
        )
    routes = OperatorRoutes(args.url, operator_key(args.admin_key_env), args.cacert)
    try:
        return routes.status()
    except RouteUnavailable as exc:
        if exc.status in (401, 403, 404):
            raise UserInputError(f"--url: {exc}") from None
        raise EndpointUnreachable(str(exc)) from None


def _local_status(args: argparse.Namespace, address: str) -> StatusReport | None:
    """The recorded stack's document through its gateway; None (read it over Ray) when
    `status` reads another stack, or the route gives none and `--via auto`."""
    from switchyard.operator_routes import RouteUnavailable, local_routes

    if args.via == "ray":
        return None
    routes = local_routes(
        address, args.state_dir, admin_key_env=args.admin_key_env, ca_file=args.cacert
    )
    if routes is None:
        if args.via == "gateway":
            raise UserInputError(
                "--via gateway: no stack recorded for this address in the state directory; "
                "use --url URL"
            )
        return None
    try:
        return routes.status()
    except RouteUnavailable as exc:
        if args.via == "auto":
            return None
        raise UserInputError(f"--via gateway: {exc}") from None


def _head_status(state_dir: Path, info: Any) -> HeadStatus | None:
    """The local head's fault tolerance, from the state directory alone."""
    from cluster.startup.fault_tolerant_head import describe_head, read_head_record
    from domain.status_report import HeadStatus

    if info is None or not info.started_local_head:
        return None
    return HeadStatus.model_validate(describe_head(read_head_record(state_dir)))


def _head_line(head: HeadStatus) -> str:
    import time

    recovered = (
        "never"
        if head.last_recovered_at is None
        else f"{time.time() - head.last_recovered_at:.0f} s ago"
    )
    return (
        f"head: fault-tolerant (GCS store {head.gcs_store}; raylets wait "
        f"{head.reconnect_timeout_s} s for the GCS; supervisor "
        f"{'running' if head.supervisor_running else 'NOT running'}; "
        f"{head.outages} outage(s), last recovered {recovered}"
        + (f"; recovering now: {', '.join(head.recovering)}" if head.recovering else "")
        + ")"
    )


def _print_unavailable(
    address: str, head: HeadStatus | None, out: TextIO, *, as_json: bool
) -> None:
    """What `status` can still say with the GCS away: the head's record."""
    if as_json:
        seen = {"address": address, "reachable": False, "head": head.model_dump() if head else None}
        out.write(json.dumps(seen, indent=2) + "\n")
    elif head is not None and head.fault_tolerant:
        out.write(_head_line(head) + "\n")
    out.flush()


def _source_text(metrics: MetricsStatus) -> str:
    if metrics.source is None:
        return "nowhere yet (no Prometheus; the manager has fewer than two samples)"
    if metrics.window_s is None:
        return metrics.source
    return f"{metrics.source} (rates over {metrics.window_s:g} s)"


def _print_inventory(console: Any, inventory: dict[str, Any] | None) -> None:
    """One row per node; values an operator override set are marked with '*'."""
    from switchyard.status_table import print_table_or_blocks

    if inventory is None:
        console.print("inventory: no manager runs")
        return
    columns = (
        "node",
        "ip",
        "accelerators",
        "model",
        "memory",
        "interconnect",
        "disk free",
        "RAM",
    )
    rows = []
    for node in inventory["nodes"]:
        changed = set(node["overridden"])

        def mark(value: str, *fields: str, changed: set[str] = changed) -> str:
            return f"{value}*" if changed.intersection(fields) else value

        rows.append(
            (
                node["node"],
                node["node_ip"],
                mark(_accelerators(node), "gpu_count"),
                mark(node["gpu_model"] or "-", "gpu_model"),
                mark(_gib(node["gpu_memory_bytes"]), "gpu_memory_bytes", "gpu_model"),
                mark(node["interconnect"] or "-", "interconnect"),
                mark(_gib(node["disk_free_bytes"]), "disk_free_bytes"),
                mark(_gib(node["host_ram_bytes"]), "host_ram_bytes"),
            )
        )
    print_table_or_blocks(console, columns, rows, title="inventory (* = overridden)")
    for problem in inventory["problems"]:
        console.print(f"inventory: {problem}")


def _accelerators(node: dict[str, Any]) -> str:
    """ "8 gpu", or where Ray's count and NVML's differ, both: "0 none (Ray 0, NVML 8)"."""
    text = f"{node['gpu_count']} {node['accelerator']}"
    ray, nvml = node.get("gpu_count_ray"), node.get("gpu_count_nvml")
    if nvml is not None and ray is not None and ray != nvml:
        text += f" (Ray {ray}, NVML {nvml})"
    return text


def _gib(n_bytes: int | None) -> str:
    return "-" if not n_bytes else f"{n_bytes / 2**30:.1f} GiB"
