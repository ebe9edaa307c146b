"""Where the relay's CPU per chunk comes from: per request, per chunk, and doing nothing.

relay_capacity.py gives one figure per level: the gateway's CPU over the chunks it relayed.
That figure mixes three costs, which call for different remedies:

  idle         what the gateway process spends with no request at all (its own polls, Ray's
               and Serve's threads), charged to whatever a level relays in its wall time
  per request  routing, authentication, vLLM's request validation, the engine request, the
               response's start and end, metrics: measured with 1-token answers
  per chunk    the marginal cost of one more relayed token: from the difference between
               128-token and 1-token answers at the same concurrency

Each is measured for the same gateway code in two places: in a plain process on uvloop
(relay_floor.py's `gateway`, no Ray) and in its Ray Serve replica (`switchyard up
--fake-engines`, relay_capacity.py's stack); relay_floor.py's `passthrough` gives the floor
per chunk. For the busiest thread of each relay (its event loop) it also counts context
switches per chunk: involuntary ones mean the loop was preempted.

    .venv/bin/python benchmarks/relay_cost_split.py            # ~4 min
    .venv/bin/python benchmarks/relay_cost_split.py --concurrency 128 --rounds 3

Not a test: nothing here asserts a number. Results: benchmarks/results/relay_cost_split.json
and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import relay_floor
from comparison_report import run_record
from gateway_profile import gateway_pid
from relay_capacity import API_KEY, measure_level, switchyard_stack
from relay_capacity import parse_args as capacity_args

from switchyard.bench.client import Endpoint

REPO_ROOT = Path(__file__).resolve().parents[1]
LONG = 128
"""Output tokens of the long answers (relay_capacity.py's default)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--requests-per-stream", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--idle-s", type=float, default=20.0)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/switchyard-relay-cost-split"))
    parser.add_argument("--results", type=Path, default=REPO_ROOT / "benchmarks/results")
    return parser.parse_args(argv)


@dataclass(frozen=True)
class ThreadSample:
    cpu_s: float
    voluntary: int
    involuntary: int


def threads(pid: int) -> dict[int, ThreadSample]:
    """Per thread of `pid`: CPU seconds and context switches so far (/proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
            status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except OSError:
            continue  # a thread that ended meanwhile
        switches = {
            key: int(value)
            for key, value in (line.split(":\t") for line in status.splitlines() if ":\t" in line)
            if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")
        }
        found[int(tid)] = ThreadSample(
            (int(stat[11]) + int(stat[12])) / tick,
            switches.get("voluntary_ctxt_switches", 0),
            switches.get("nonvoluntary_ctxt_switches", 0),
        )
    return found


def process_cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def split(relay: str, pid: int, endpoint: Endpoint, args: argparse.Namespace) -> dict[str, Any]:
    """One round of the three costs of the relay process `pid`."""
    process = psutil.Process(pid)
    short = capacity_args(["--output-len", "1", "--requests-per-stream", "64"])
    measure_level(endpoint, 8, short, [])  # warm: first connections, imports
    time.sleep(3)
    before = process_cpu_s(process)
    time.sleep(args.idle_s)
    idle = (process_cpu_s(process) - before) / args.idle_s

    def level(output_len: int) -> tuple[dict[str, Any], float, dict[int, ThreadSample]]:
        per_stream = str(args.requests_per_stream)
        load = capacity_args(["--output-len", str(output_len), "--requests-per-stream", per_stream])
        threads_before, cpu_before = threads(pid), process_cpu_s(process)
        run = measure_level(endpoint, args.concurrency, load, [])
        cpu = process_cpu_s(process) - cpu_before
        after = threads(pid)
        moved = {
            tid: ThreadSample(
                now.cpu_s - then.cpu_s,
                now.voluntary - then.voluntary,
                now.involuntary - then.involuntary,
            )
            for tid, now in after.items()
            if (then := threads_before.get(tid)) is not None
        }
        return run, cpu, moved

    short_run, short_cpu, _ = level(1)
    long_run, long_cpu, moved = level(LONG)
    loop = max(moved.values(), key=lambda t: t.cpu_s)  # the event loop's thread
    per_request_short = short_cpu / short_run["requests"]
    per_request_long = long_cpu / long_run["requests"]
    chunks_short = short_run["chunks"] / short_run["requests"]
    chunks_long = long_run["chunks"] / long_run["requests"]
    idle_share = idle * long_run["duration_s"] / long_run["chunks"]
    return {
        "relay": relay,
        "idle_cpu_s_per_s": round(idle, 4),
        "per_request_us": round(1e6 * per_request_short, 1),
        "per_chunk_us": round(
            1e6 * (per_request_long - per_request_short) / (chunks_long - chunks_short), 1
        ),
        "level_us_per_chunk": round(1e6 * long_cpu / long_run["chunks"], 1),
        "level_duration_s": long_run["duration_s"],
        "idle_share_us_per_chunk": round(1e6 * idle_share, 1),
        "loop_voluntary_per_chunk": round(loop.voluntary / long_run["chunks"], 3),
        "loop_involuntary_per_chunk": round(loop.involuntary / long_run["chunks"], 3),
        "failed": short_run["failed"] + long_run["failed"],
    }


def plain(target: Any, upstream: str, name: str, args: argparse.Namespace) -> dict[str, Any]:
    ready: Any = mp.Queue()
    process = mp.Process(target=target, args=(upstream, ready), daemon=True)
    process.start()
    try:
        url = ready.get(timeout=120)
        assert process.pid is not None
        return split(name, process.pid, Endpoint(url + "/v1", "default", ""), args)
    finally:
        process.terminate()


def in_ray(args: argparse.Namespace) -> dict[str, Any]:
    with switchyard_stack(args.workdir) as (url, state):
        endpoint = Endpoint(url, "default", API_KEY)
        return split("gateway in its Ray replica", gateway_pid(state), endpoint, args)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    source, upstream = relay_floor.start_emitter()
    document: dict[str, Any] = {**run_record("relay_cost_split.py", argv), "rows": []}
    for _ in range(args.rounds):
        rows = document["rows"]
        rows.append(plain(relay_floor.passthrough, upstream, "uvloop pass-through", args))
        rows.append(plain(relay_floor.gateway, upstream, "gateway, plain process", args))
        rows.append(in_ray(args))
        print(json.dumps(rows[-3:]), flush=True)
    source.terminate()
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "relay_cost_split.json").write_text(json.dumps(document, indent=2))
    columns = (
        "idle_cpu_s_per_s", "per_request_us", "per_chunk_us", "level_us_per_chunk",
        "idle_share_us_per_chunk", "loop_voluntary_per_chunk", "loop_involuntary_per_chunk",
    )  # fmt: skip
    print(f"concurrency {args.concurrency}, medians of {args.rounds} rounds\n")
    print("| relay | " + " | ".join(columns) + " | failed |")
    print("|---|" + "---:|" * (len(columns) + 1))
    for relay in dict.fromkeys(r["relay"] for r in document["rows"]):
        rows = [r for r in document["rows"] if r["relay"] == relay]
        cells = [f"{statistics.median(r[c] for r in rows):g}" for c in columns]
        print(f"| {relay} | " + " | ".join(cells) + f" | {sum(r['failed'] for r in rows)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
