"""Where the gateway replica's CPU goes, stage by stage, while it relays a streaming load.

Starts a stack (a real vLLM miniature by default, `--fake-engines` for the CPU-cheap emitter of
relay_capacity.py), loads it with `switchyard bench`'s client at one concurrency, samples the
gateway replica's Python stacks with py-spy (shipped with ray[default]) during the load, and
charges every sample to one stage of the relay: the first frame, walking from the leaf towards
the root, that a stage rule below claims. Prints the table and writes
benchmarks/results/gateway_profile[-LABEL].json (with the 40 heaviest raw stacks, to refine the
rules against).

    .venv/bin/python benchmarks/gateway_profile.py                    # real engine, ~3 min
    .venv/bin/python benchmarks/gateway_profile.py --fake-engines     # the relay alone

py-spy needs ptrace rights over the replica (root, or the same user with ptrace allowed).
Sampling pauses the process ~100 times a second; shares, not absolute times, are the result.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
from comparison_systems import GATEWAY_ROLE
from relay_capacity import API_KEY, switchyard_stack

from switchyard.bench.client import Endpoint
from switchyard.bench.load import run_level

REPO_ROOT = Path(__file__).resolve().parents[1]

STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    # (stage, substrings of "function (file)" that claim a frame), tried leaf first.
    ("error-event scan", ("split_at_error_event",)),
    ("SSE framing", ("complete_events", "sse_text", "token_events", "sse_encoding")),
    ("usage scan", ("scan_events", "stream_usage")),
    ("metrics", ("gateway_metrics", "ray/util/metrics", "request_timing", "TenantAccounting")),
    ("read (engine connection)", ("aiohttp/", "engine_connection")),
    (
        "write (Starlette/uvicorn response)",
        ("starlette/responses", "uvicorn/", "h11", "httptools", "_with_request_id", "sending",
         "uvicorn_internals", "relay_response"),
    ),
    ("request set-up (routing, auth, parse)", ("gateway.py", "gateway_guard", "fastapi/",
                                                "starlette/", "tenant_gate", "route_resolver")),
    ("relay (per-chunk dispatch)", ("request_forwarding", "direct_http_backend",
                                     "direct_stream", "stream_relay")),
    ("asyncio event loop", ("asyncio/", "selectors", "uvloop")),
    ("Ray core worker and Serve replica", ("ray/",)),
)  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fake-engines", action="store_true")
    parser.add_argument("--model", default=None, help="default: minimax-m2.5 (llama if fake)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/switchyard-gateway-profile"))
    parser.add_argument("--results", type=Path, default=REPO_ROOT / "benchmarks/results")
    parser.add_argument("--label", default="")
    parser.add_argument(
        "--all-threads",
        dest="gil_only",
        action="store_false",
        help="sample every active thread, not only the one holding the GIL (py-spy's idle "
        "detection then counts some waiting threads as busy)",
    )
    return parser.parse_args(argv)


def stage_of(stack: list[str]) -> str:
    """`stack` root first, as py-spy's raw format writes it."""
    for frame in reversed(stack):
        for stage, needles in STAGES:
            if any(needle in frame for needle in needles):
                return stage
    return "other"


def read_raw(path: Path) -> Counter[tuple[str, ...]]:
    stacks: Counter[tuple[str, ...]] = Counter()
    for line in path.read_text().splitlines():
        frames, _, count = line.rpartition(" ")
        if frames and count.isdigit():
            stacks[tuple(frames.split(";"))] += int(count)
    return stacks


def cpu_by_thread(pid: int) -> dict[str, float]:
    """CPU seconds so far of each thread of `pid`, summed by thread name (/proc's comm)."""
    used: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            # utime and stime, fields 14 and 15 of stat (12 and 13 after the comm).
            used[name] = used.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf(
                "SC_CLK_TCK"
            )
    return used


def gateway_pid(state: Path) -> int:
    session = json.loads((state / "local_head.json").read_text())["session_dir"]
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if cmdline and cmdline[0].startswith(GATEWAY_ROLE) and any(session in a for a in cmdline):
            return proc.pid
    for proc in psutil.process_iter(["cmdline"]):  # titles may drop the session path
        cmdline = proc.info.get("cmdline") or []
        if cmdline and cmdline[0].startswith(GATEWAY_ROLE):
            return proc.pid
    raise RuntimeError("no gateway replica process found")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model = args.model or ("miniature:llama" if args.fake_engines else "miniature:minimax-m2.5")
    args.workdir.mkdir(parents=True, exist_ok=True)
    raw = args.workdir / "gateway.raw"
    prompts = [f"profile prompt number {i}" for i in range(args.requests)]
    with switchyard_stack(args.workdir, model, fake_engines=args.fake_engines) as (url, state):
        endpoint = Endpoint(url, "default", API_KEY)
        warm = [f"warm-up {i}" for i in range(args.concurrency)]
        asyncio.run(
            run_level(
                endpoint, warm, output_len=8, concurrency=args.concurrency, request_rate_per_s=None
            )
        )
        pid = gateway_pid(state)
        gateway = psutil.Process(pid)
        cpu_before = sum(gateway.cpu_times()[:2])
        threads_before = cpu_by_thread(pid)
        done = threading.Event()
        result: dict[str, Any] = {}

        def load() -> None:
            result["run"] = asyncio.run(
                run_level(
                    endpoint,
                    prompts,
                    output_len=args.output_len,
                    concurrency=args.concurrency,
                    request_rate_per_s=None,
                )
            )
            done.set()

        spy = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(pid),
                "--rate", str(args.rate), "--format", "raw", "--output", str(raw),
                "--duration", "600", *(["--gil"] if args.gil_only else []),
            ],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        worker = threading.Thread(target=load)
        worker.start()
        worker.join()
        cpu_s = sum(gateway.cpu_times()[:2]) - cpu_before
        threads = {
            name: s - threads_before.get(name, 0.0) for name, s in cpu_by_thread(pid).items()
        }
        spy.send_signal(2)  # py-spy writes its file on SIGINT
        with contextlib.suppress(subprocess.TimeoutExpired):
            spy.wait(timeout=60)
    stacks = read_raw(raw)
    by_stage: Counter[str] = Counter()
    for stack, count in stacks.items():
        by_stage[stage_of(list(stack))] += count
    total = sum(by_stage.values()) or 1
    run = result["run"]
    tokens = sum(len(r.chunk_times_s) for r in run.records)
    document = {
        "label": args.label,
        "engine": "fake" if args.fake_engines else "vllm",
        "model": model,
        "concurrency": args.concurrency,
        "requests": args.requests,
        "output_len": args.output_len,
        "duration_s": round(run.duration_s, 2),
        "tokens": tokens,
        "gateway_cpu_s": round(cpu_s, 3),
        "gateway_cpu_us_per_token": round(1e6 * cpu_s / max(tokens, 1), 1),
        "samples": total,
        "gil_only": args.gil_only,
        "cpu_s_by_thread": {
            n: round(c, 2) for n, c in sorted(threads.items(), key=lambda t: -t[1]) if c >= 0.01
        },
        "share_by_stage": {s: round(c / total, 3) for s, c in by_stage.most_common()},
        "heaviest_stacks": [
            {"count": c, "stack": list(s)[-12:]} for s, c in stacks.most_common(40)
        ],
    }
    args.results.mkdir(parents=True, exist_ok=True)
    name = f"gateway_profile{'-' + args.label if args.label else ''}.json"
    (args.results / name).write_text(json.dumps(document, indent=2))
    print(
        f"{document['engine']} engine, c={args.concurrency}: {tokens} tokens in "
        f"{run.duration_s:.1f} s; gateway {cpu_s:.2f} CPU s = "
        f"{document['gateway_cpu_us_per_token']} us per token; {total} samples"
    )
    print("threads (CPU s):", document["cpu_s_by_thread"])
    print("| stage | share of the gateway's samples |\n|---|---:|")
    for stage, share in document["share_by_stage"].items():
        print(f"| {stage} | {100 * share:.1f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
