"""`switchyard dashboards build|push`: the Grafana dashboards generated from the metric names."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from domain.exit_codes import ExitCode, UserInputError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("dashboards", help="build or upload the Grafana dashboards")
    actions = parser.add_subparsers(dest="dashboards_command", metavar="ACTION")
    actions.required = True
    build = actions.add_parser(
        "build", help="write the dashboards, provisioning and Prometheus config files"
    )
    build.add_argument("--out", type=Path, default=Path("dashboards"))
    build.set_defaults(handler=run_build)
    push = actions.add_parser("push", help="upload the dashboards to a Grafana server")
    push.add_argument("--url", required=True, help="Grafana URL, e.g. http://127.0.0.1:3000")
    push.add_argument("--token", default=None, help="Grafana service account token")
    push.add_argument("--folder", default="Switchyard", help="folder to put them in")
    push.add_argument("--timeout-s", type=float, default=30.0)
    push.set_defaults(handler=run_push)


def run_build(args: argparse.Namespace) -> int:
    from switchyard.observability.dashboards import write_files

    for path in write_files(args.out):
        print(f"wrote {path}")
    return ExitCode.OK


def run_push(args: argparse.Namespace) -> int:
    from urllib.parse import urlparse

    from switchyard.observability.grafana_push import push_dashboards

    parsed = urlparse(args.url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise UserInputError(f"--url: {args.url!r} is not an http(s) URL")
    for uid, url in push_dashboards(args.url, args.token, args.folder, args.timeout_s):
        print(f"pushed {uid}: {url}")
    return ExitCode.OK
