"""Soak: constant concurrency against a running stack for a long time, with a hot swap in the
middle; reports errors, latency percentiles and the memory of the gateway and the manager.

    .venv/bin/python -m benchmarks run soak --up --json benchmarks/results/soak.json  # make soak
    .venv/bin/python -m benchmarks run soak --url http://127.0.0.1:8000/v1 \\
        --state-dir ~/.switchyard --swap-old mini-kimi-k2.5 --swap-source miniature:llama \\
        --swap-name mini-llama

`--up` starts a private stack (`switchyard up --detach` on free ports in a temporary state
dir, the default Kimi miniature), swaps it to the Llama miniature in the middle, and takes
it down at the end; without it the soak runs against the stack at --url / --state-dir.
Defaults: concurrency 16, 600 s (`make soak`); CI runs it for 60 s (tests/faults). The swap
starts at half the duration; if it has not finished when the duration is up, the load goes
on until it has (a swap is never cut short), and `load_seconds` says how long it really ran.
Memory is the RSS of this stack's gateway replica(s) and manager actor, found among the
processes of the local Ray session that `switchyard up` recorded in the state dir (a remote
node's processes are not seen). Not a test: nothing here asserts a number; the JSON goes to
stdout and, with --json, to a file. The suite's block in BENCHMARKS.md is drawn from
benchmarks/results/soak.json by `python -m benchmarks report soak` (a run never writes it:
CI's short soaks must not).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from benchmarks.suites import suite_of
from cluster.startup.ray_runtime import local_head_processes
from domain.validation_message import validation_line

SUITE = suite_of(__name__)
SWITCHYARD = str(Path(sys.executable).with_name("switchyard"))
GATEWAY_PROCESS = "ServeReplica:switchyard-gateway"
MANAGER_PROCESS = "ManagerService"
MIB = 1024 * 1024


class SoakConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(description="the endpoint's base URL, ending in /v1")
    model: str = "default"
    state_dir: Path = Field(description="the stack's --state-dir (swap, process lookup)")
    concurrency: int = Field(16, ge=1, le=1024)
    duration_s: float = Field(600.0, gt=0, le=7 * 24 * 3600)
    max_tokens: int = Field(16, ge=1, le=4096)
    request_timeout_s: float = Field(300.0, gt=0, le=3600)
    swap_old: str | None = None
    swap_source: str | None = None
    swap_name: str | None = None
    api_key: str | None = None


@dataclass
class Sample:
    started_s: float
    seconds: float
    ok: bool
    error: str | None
    model: str | None


@dataclass
class SwapRun:
    started_at_s: float = 0.0
    seconds: float = 0.0
    returncode: int | None = None
    output_tail: str = ""


@dataclass
class Soak:
    config: SoakConfig
    samples: list[Sample] = field(default_factory=list)
    swap: SwapRun | None = None
    memory_start: dict[str, float] = field(default_factory=dict)
    memory_end: dict[str, float] = field(default_factory=dict)
    memory_peak: dict[str, float] = field(default_factory=dict)


def memory_mib(state_dir: Path) -> dict[str, float]:
    """RSS (MiB) of the gateway replicas together and of the manager actor."""
    totals = {"gateway_rss_mib": 0.0, "manager_rss_mib": 0.0}
    for proc in local_head_processes(state_dir):
        try:
            title = " ".join(proc.cmdline())
            rss = proc.memory_info().rss / MIB
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if GATEWAY_PROCESS in title:
            totals["gateway_rss_mib"] += rss
        elif MANAGER_PROCESS in title:
            totals["manager_rss_mib"] += rss
    return totals


def _error_of(text: str, sse: bool) -> tuple[str | None, str | None]:
    model = None
    lines = [ln.removeprefix("data: ") for ln in text.splitlines() if ln.startswith("data: ")]
    for document in lines if sse else [text]:
        if document == "[DONE]":
            continue
        try:
            parsed = json.loads(document)
        except json.JSONDecodeError:
            return f"not JSON: {document[:120]}", model
        if isinstance(parsed, dict) and "error" in parsed:
            return str(parsed["error"])[:300], model
        if isinstance(parsed, dict):
            model = parsed.get("model", model)
    return None, model


async def _worker(
    soak: Soak, client: httpx.AsyncClient, streaming: bool, started: float, stop: asyncio.Event
) -> None:
    config = soak.config
    body = {
        "model": config.model,
        "prompt": "The cluster",
        "max_tokens": config.max_tokens,
        "ignore_eos": True,
        "stream": streaming,
    }
    while not stop.is_set():
        t0 = time.monotonic()
        error: str | None
        model = None
        try:
            async with client.stream("POST", f"{config.url}/completions", json=body) as reply:
                text = (await reply.aread()).decode(errors="replace")
                if reply.status_code != 200:
                    error = f"HTTP {reply.status_code}: {text[:200]}"
                else:
                    error, model = _error_of(text, streaming)
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"
        soak.samples.append(
            Sample(t0 - started, time.monotonic() - t0, error is None, error, model)
        )
        if error is not None:
            await asyncio.sleep(0.5)


async def _swap(soak: Soak, started: float) -> None:
    config = soak.config
    assert config.swap_old and config.swap_source and config.swap_name
    run = SwapRun(started_at_s=time.monotonic() - started)
    soak.swap = run
    process = await asyncio.create_subprocess_exec(
        SWITCHYARD,
        "swap",
        config.swap_old,
        config.swap_source,
        "--name",
        config.swap_name,
        "--state-dir",
        str(config.state_dir),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    run.returncode = process.returncode
    run.seconds = time.monotonic() - started - run.started_at_s
    run.output_tail = output.decode(errors="replace")[-2000:]


async def _watch_memory(soak: Soak, stop: asyncio.Event) -> None:
    while not stop.is_set():
        for key, value in memory_mib(soak.config.state_dir).items():
            soak.memory_peak[key] = max(soak.memory_peak.get(key, 0.0), value)
        try:
            await asyncio.wait_for(stop.wait(), 10.0)
        except TimeoutError:
            continue


async def run_soak(config: SoakConfig) -> Soak:
    soak = Soak(config)
    soak.memory_start = memory_mib(config.state_dir)
    headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
    limits = httpx.Limits(max_connections=config.concurrency)
    stop = asyncio.Event()
    started = time.monotonic()
    async with httpx.AsyncClient(
        timeout=config.request_timeout_s, headers=headers, limits=limits
    ) as client:
        workers = [
            asyncio.create_task(_worker(soak, client, i % 2 == 0, started, stop))
            for i in range(config.concurrency)
        ]
        watcher = asyncio.create_task(_watch_memory(soak, stop))
        swap_task = None
        if config.swap_old:
            await asyncio.sleep(config.duration_s / 2)
            swap_task = asyncio.create_task(_swap(soak, started))
        await asyncio.sleep(max(0.0, config.duration_s - (time.monotonic() - started)))
        if swap_task is not None:
            await swap_task
        stop.set()
        await asyncio.gather(*workers, watcher)
    soak.memory_end = memory_mib(config.state_dir)
    return soak


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1))
    return ordered[index]


def summary(soak: Soak) -> dict[str, Any]:
    latencies = [s.seconds for s in soak.samples if s.ok]
    errors = [s for s in soak.samples if not s.ok]
    kinds: dict[str, int] = {}
    for sample in errors:
        key = (sample.error or "")[:80]
        kinds[key] = kinds.get(key, 0) + 1
    answered: dict[str, int] = {}
    for sample in soak.samples:
        if sample.ok and sample.model:
            answered[sample.model] = answered.get(sample.model, 0) + 1
    load_seconds = max((s.started_s + s.seconds for s in soak.samples), default=0.0)
    growth = {
        key: round(soak.memory_end.get(key, 0.0) - soak.memory_start.get(key, 0.0), 1)
        for key in soak.memory_start
    }
    swap = soak.swap
    return {
        "concurrency": soak.config.concurrency,
        "duration_s": soak.config.duration_s,
        "load_seconds": round(load_seconds, 1),
        "requests": len(soak.samples),
        "ok": len(latencies),
        "errors": len(errors),
        "error_kinds": kinds,
        "requests_per_s": round(len(soak.samples) / load_seconds, 2) if load_seconds else 0.0,
        "latency_s": {
            name: None if value is None else round(value, 3)
            for name, value in (
                ("p50", percentile(latencies, 0.50)),
                ("p99", percentile(latencies, 0.99)),
                ("max", max(latencies, default=None)),
            )
        },
        "answered_by": answered,
        "swap": None
        if swap is None
        else {
            "started_at_s": round(swap.started_at_s, 1),
            "seconds": round(swap.seconds, 1),
            "returncode": swap.returncode,
            "output_tail": swap.output_tail[-600:],
        },
        "memory_mib": {
            "start": {k: round(v, 1) for k, v in soak.memory_start.items()},
            "end": {k: round(v, 1) for k, v in soak.memory_end.items()},
            "peak": {k: round(v, 1) for k, v in soak.memory_peak.items()},
            "growth": growth,
        },
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def private_stack() -> Iterator[tuple[str, Path]]:
    """`switchyard up --detach` on free ports in a temporary state dir; down afterwards."""
    with tempfile.TemporaryDirectory(prefix="switchyard-soak-") as tmp:
        state_dir = Path(tmp)
        port = _free_port()
        command = [SWITCHYARD, "up", "--detach", "--state-dir", str(state_dir)]
        command += ["--port", str(port), "--ray-port", str(_free_port())]
        command += ["--dashboard-port", str(_free_port())]
        print(f"soak: {' '.join(command)}", file=sys.stderr)
        up = subprocess.run(command, capture_output=True, text=True, check=False)
        try:
            if up.returncode != 0:
                raise SystemExit(f"soak: switchyard up failed:\n{up.stdout}{up.stderr}")
            yield f"http://127.0.0.1:{port}/v1", state_dir
        finally:
            down = [SWITCHYARD, "down", "--state-dir", str(state_dir)]
            subprocess.run(down, capture_output=True, text=True, check=False)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=SUITE.command, description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000/v1")
    parser.add_argument("--model", default="default")
    parser.add_argument("--state-dir", type=Path, default=Path.home() / ".switchyard")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration-s", type=float, default=600.0)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--request-timeout-s", type=float, default=300.0)
    parser.add_argument("--swap-old")
    parser.add_argument("--swap-source")
    parser.add_argument("--swap-name")
    parser.add_argument("--api-key")
    parser.add_argument("--json", type=Path, help="also write the summary here")
    parser.add_argument(
        "--up", action="store_true", help="start a private stack (swap Kimi -> Llama miniature)"
    )
    args = parser.parse_args(argv)
    if args.up and not args.swap_old:
        args.swap_old, args.swap_source, args.swap_name = (
            "mini-kimi-k2.5",
            "miniature:llama",
            "mini-llama",
        )
    swap = (args.swap_old, args.swap_source, args.swap_name)
    if any(swap) and not all(swap):
        parser.error("--swap-old, --swap-source and --swap-name go together")
    if args.up:
        with private_stack() as (url, state_dir):
            args.url, args.state_dir = url, state_dir
            return _run(parser, args)
    return _run(parser, args)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        config = _config(args)
    except ValidationError as exc:
        parser.error(validation_line(exc, lambda loc: "--" + "-".join(loc).replace("_", "-")))
    result = summary(asyncio.run(run_soak(config)))
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    return 0


def _config(args: argparse.Namespace) -> SoakConfig:
    return SoakConfig(
        url=args.url.rstrip("/"),
        model=args.model,
        state_dir=args.state_dir,
        concurrency=args.concurrency,
        duration_s=args.duration_s,
        max_tokens=args.max_tokens,
        request_timeout_s=args.request_timeout_s,
        swap_old=args.swap_old,
        swap_source=args.swap_source,
        swap_name=args.swap_name,
        api_key=args.api_key,
    )


def markdown(document: dict[str, Any]) -> str:
    """The suite's block in BENCHMARKS.md, from a summary `main` wrote."""
    latency, memory, swap = document["latency_s"], document["memory_mib"], document["swap"] or {}
    answered = ", ".join(f"{n:,} by {m}" for m, n in document["answered_by"].items())
    # The phases as `switchyard swap` printed them, from the tail of its output.
    phases = [x for x in swap.get("output_tail", "").splitlines() if x.startswith("phases: ")]
    roles = (("gateway replica", "gateway_rss_mib"), ("manager actor", "manager_rss_mib"))
    rows = {
        "requests": f"{document['requests']:,} (answered {answered}), "
        f"{document['requests_per_s']} per s",
        "errors": f"{document['errors']} {document['error_kinds'] or ''}".strip(),
        "latency p50 / p99 / max": " / ".join(f"{latency[k]} s" for k in ("p50", "p99", "max")),
        "swap": f"{swap.get('seconds')} s ({phases[-1][8:] if phases else 'phases not recorded'})",
        **{
            f"{role} RSS": f"{memory['start'][key]} MiB at start, {memory['end'][key]} MiB at end "
            f"({memory['growth'][key]:+} MiB; peak {memory['peak'][key]})"
            for role, key in roles
        },
    }
    head = (
        f"{document['concurrency']} clients for {document['duration_s']:.0f} s, a swap at half "
        f"time; the load ran {document['load_seconds']} s (it waits for the swap to end)."
    )
    table = [f"| {name} | {value} |" for name, value in rows.items()]
    return "\n".join([head, "", "| figure | value |", "|---|---|", *table])
