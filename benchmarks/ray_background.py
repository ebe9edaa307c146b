"""What Ray's background processes cost a serving head, setting by setting.

For each variant (environment settings given to `ray start`, which every Ray process
inherits) one `switchyard up --fake-engines` stack is started, left to settle, and measured
twice: CPU seconds per second of every process with no load, then during one streaming load
level through the gateway (the fake engine costs almost nothing, so what remains is the
relay and Ray). The variants are measured one after the other in one run; compare them
within it. Results: benchmarks/results/ray_background.json and the block between the markers
in BENCHMARKS.md.

    .venv/bin/python benchmarks/ray_background.py            # ~2 min per variant

Which settings Switchyard keeps, and what each costs observability, is in
cluster/serve_tuning.py and BENCHMARKS.md. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from comparison_report import load_average, run_record, write_markdown
from comparison_systems import GATEWAY_ROLE
from cpu_accounting import cpu_by_role, cpu_seconds, ray_session_scope
from relay_capacity import API_KEY, idle_cpu, switchyard_stack

from switchyard.bench.client import Endpoint
from switchyard.bench.load import run_level

REPO_ROOT = Path(__file__).resolve().parents[1]
BEGIN = "<!-- ray_background:begin -->"
END = "<!-- ray_background:end -->"

VARIANTS: dict[str, dict[str, str]] = {
    "Ray's defaults under Switchyard's Serve settings": {},
    "task events off (RAY_enable_task_events=0)": {"RAY_enable_task_events": "0"},
    "event-loop stats off (RAY_event_stats=0)": {"RAY_event_stats": "0"},
    "Serve control loop every 0.5 s (RAY_SERVE_CONTROL_LOOP_INTERVAL_S)": {
        "RAY_SERVE_CONTROL_LOOP_INTERVAL_S": "0.5"
    },
    "all three": {
        "RAY_enable_task_events": "0",
        "RAY_event_stats": "0",
        "RAY_SERVE_CONTROL_LOOP_INTERVAL_S": "0.5",
    },
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default=",".join(str(i) for i in range(len(VARIANTS))))
    parser.add_argument("--settle-s", type=float, default=20.0)
    parser.add_argument("--idle-s", type=float, default=30.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/switchyard-ray-background"))
    parser.add_argument("--results", type=Path, default=REPO_ROOT / "benchmarks/results")
    parser.add_argument("--markdown", type=Path, default=REPO_ROOT / "BENCHMARKS.md")
    return parser.parse_args(argv)


def group(roles: dict[str, float]) -> dict[str, float]:
    """Gateway, engine replica, Switchyard's actors, and Ray's own processes."""
    out = {"gateway": 0.0, "engine replica": 0.0, "switchyard actors": 0.0, "ray": 0.0}
    for role, value in roles.items():
        if role.startswith(GATEWAY_ROLE):
            out["gateway"] += value
        elif role.startswith("ray::ServeReplica:"):
            out["engine replica"] += value
        elif role in ("ray::ManagerService", "ray::FleetRegistry"):
            out["switchyard actors"] += value
        elif role != "load generator (bench client)":
            out["ray"] += value
    return {k: round(v, 3) for k, v in out.items()}


def measure(name: str, env: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    workdir = args.workdir / str(abs(hash(name)))
    workdir.mkdir(parents=True, exist_ok=True)
    with switchyard_stack(workdir, env=env) as (url, state):
        scope = ray_session_scope(state)
        endpoint = Endpoint(url, "default", API_KEY)
        warm = [f"warm {i}" for i in range(16)]
        asyncio.run(
            run_level(endpoint, warm, output_len=16, concurrency=16, request_rate_per_s=None)
        )
        time.sleep(args.settle_s)
        idle = idle_cpu([scope], seconds=args.idle_s)
        before = cpu_seconds(scope)
        prompts = [f"background {i}" for i in range(args.requests)]
        run = asyncio.run(
            run_level(
                endpoint,
                prompts,
                output_len=128,
                concurrency=args.concurrency,
                request_rate_per_s=None,
            )
        )
        loaded = cpu_by_role(before, cpu_seconds(scope))
    tokens = sum(len(r.chunk_times_s) for r in run.records)
    per_s = {role: s / run.duration_s for role, s in loaded.items()}
    return {
        "variant": name,
        "env": env,
        "idle_cpu_s_per_s": group(idle),
        "idle_by_process": idle,
        "loaded_cpu_s_per_s": group(per_s),
        "loaded_by_process": {r: round(s, 3) for r, s in per_s.items()},
        "tokens": tokens,
        "duration_s": round(run.duration_s, 2),
        "failed": sum(1 for r in run.records if not r.succeeded),
    }


def markdown(document: dict[str, Any]) -> str:
    lines = [
        f"Run {document['date']} on {document['machine']['cpu']}, "
        f"{document['machine']['cores']} cores; load average {document['load_before']} before, "
        f"{document['load_after']} after. Command: `{document['command']}`",
        "",
        "CPU seconds per second (cores busy), idle and during a load level of "
        f"{document['config']['requests']} streams of 128 tokens at concurrency "
        f"{document['config']['concurrency']}:",
        "",
        "| variant | idle: Ray | idle: Switchyard actors | idle: gateway | idle: total "
        "| loaded: Ray | loaded: gateway | loaded: total | failed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in document["variants"]:
        idle, loaded = row["idle_cpu_s_per_s"], row["loaded_cpu_s_per_s"]
        lines.append(
            f"| {row['variant']} | {idle['ray']:.3f} | {idle['switchyard actors']:.3f} "
            f"| {idle['gateway']:.3f} | {sum(idle.values()):.3f} | {loaded['ray']:.3f} "
            f"| {loaded['gateway']:.3f} | {sum(loaded.values()):.3f} | {row['failed']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = list(VARIANTS)
    chosen = [names[int(i)] for i in args.variants.split(",") if i]
    document: dict[str, Any] = {
        **run_record("ray_background.py", argv),
        "config": {"concurrency": args.concurrency, "requests": args.requests},
        "variants": [],
    }
    for name in chosen:
        print(f"== {name}", flush=True)
        row = measure(name, VARIANTS[name], args)
        print(json.dumps({k: row[k] for k in ("idle_cpu_s_per_s", "loaded_cpu_s_per_s")}))
        document["variants"].append(row)
    document["load_after"] = load_average()
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "ray_background.json").write_text(json.dumps(document, indent=2))
    table = markdown(document)
    print(table)
    write_markdown(args.markdown, table, begin=BEGIN, end=END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
