"""`switchyard metrics prometheus`: a local Prometheus server scraping the running cluster."""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from domain.exit_codes import ExitCode, UserInputError

DEBIAN_PROMETHEUS = "/usr/bin/prometheus"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("metrics", help="run Prometheus against the running cluster")
    actions = parser.add_subparsers(dest="metrics_command", metavar="ACTION")
    actions.required = True
    prom = actions.add_parser(
        "prometheus",
        help="run a local Prometheus server scraping every node's Ray metrics agent, "
        "in the foreground until Ctrl-C",
    )
    prom.add_argument("--port", type=int, default=9090, help="Prometheus web port (9090)")
    prom.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    prom.add_argument("--state-dir", type=Path, default=None)
    prom.add_argument(
        "--sd-file",
        type=Path,
        default=None,
        help="Ray's service discovery file (default: the one of the head `up` started)",
    )
    prom.add_argument("--scrape-interval-s", type=int, default=10)
    prom.add_argument(
        "--binary", default=None, help=f"prometheus executable (default: PATH, {DEBIAN_PROMETHEUS})"
    )
    prom.set_defaults(handler=run_prometheus)


def prometheus_binary(explicit: str | None) -> str:
    found = explicit or shutil.which("prometheus") or DEBIAN_PROMETHEUS
    if not Path(found).is_file():
        raise UserInputError(
            f"--binary: no Prometheus server at {found}; install it (Debian/Ubuntu: "
            "`apt-get install prometheus`, which `make setup` does where apt is usable) "
            "or pass --binary PATH"
        )
    return found


def run_prometheus(args: argparse.Namespace) -> int:
    import yaml

    from cluster.telemetry.metrics_targets import service_discovery_file
    from switchyard.observability.alert_rules import alert_rules_file
    from switchyard.observability.provisioning import ALERTS_FILE, prometheus_config
    from switchyard.observability.status_metrics import PROMETHEUS_URL_FILE
    from switchyard.stack_config import default_state_dir

    if not 1 <= args.port <= 65535:
        raise UserInputError(f"--port: {args.port} is not a TCP port (1-65535)")
    if not 1 <= args.scrape_interval_s <= 3600:
        raise UserInputError(f"--scrape-interval-s: {args.scrape_interval_s} is not in 1-3600")
    binary = prometheus_binary(args.binary)
    state_dir = args.state_dir or default_state_dir()
    sd_file = args.sd_file or service_discovery_file(state_dir)
    home = state_dir / "prometheus"
    home.mkdir(parents=True, exist_ok=True)
    config = home / "prometheus.yml"
    (home / ALERTS_FILE).write_text(yaml.safe_dump(alert_rules_file(), sort_keys=False))
    config.write_text(
        yaml.safe_dump(prometheus_config(str(sd_file), args.scrape_interval_s), sort_keys=False)
    )
    command = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={home / 'data'}",
        f"--web.listen-address={args.host}:{args.port}",
    ]
    print(
        f"switchyard: Prometheus on http://{args.host}:{args.port} scraping the targets in "
        f"{sd_file} (Ctrl-C to stop)",
        flush=True,
    )
    process = subprocess.Popen(command)
    # SIGTERM (e.g. from a test or a supervisor) stops Prometheus as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: process.terminate())
    # `switchyard status` asks this server for tok/s and TTFT while it runs.
    url_file = state_dir / PROMETHEUS_URL_FILE
    url_file.write_text(f"http://{args.host}:{args.port}\n")
    try:
        code = process.wait()
    except KeyboardInterrupt:
        process.terminate()
        process.wait(timeout=30)
        return ExitCode.OK
    finally:
        url_file.unlink(missing_ok=True)
    if code not in (0, -signal.SIGTERM):
        print(f"switchyard metrics: prometheus exited with {code}", file=sys.stderr)
        return code
    return ExitCode.OK
