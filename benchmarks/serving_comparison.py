"""Switchyard's gateway against the alternatives, in one run on one machine and one miniature.

Four systems serve the same miniature (MiniMax-M2.5-shaped by default), one after the other
(never two engines at once), each with `enforce_eager` and VLLM_CPU_KVCACHE_SPACE=1:

  direct         vLLM AsyncLLM in-process, no HTTP (the ceiling; benchmarks/direct_engine.py)
  vllm-server    vLLM's own OpenAI server, `python -m vllm.entrypoints.openai.api_server`
  ray-serve-llm  Ray Serve LLM's `build_openai_app`, defaults (benchmarks/ray_serve_llm_app.py)
  switchyard     `switchyard up` (Ray Serve LLM engine app behind Switchyard's gateway)

The three HTTP servers are loaded by `switchyard bench`'s client (switchyard.bench) with the
same exact-length prompts; the direct engine gets the same prompts as token ids. Results go
to benchmarks/results/ (JSON, PNG) and between the markers in BENCHMARKS.md.

    .venv/bin/python benchmarks/serving_comparison.py            # everything, ~30-60 min
    .venv/bin/python benchmarks/serving_comparison.py --systems vllm-server,switchyard

Not a test: nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from cpu_accounting import (
    Scope,
    cpu_by_role,
    cpu_seconds,
    group_scope,
    own_cpu_seconds,
    ray_session_scope,
)

from switchyard.bench.client import Endpoint
from switchyard.bench.metrics import LevelMetrics
from switchyard.bench.plot import plot_series
from switchyard.bench.prompts import Prompt, exact_length_prompts
from switchyard.bench.request_record import RequestRecord
from switchyard.bench.sweep import SweepPlan, run_sweep

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = REPO_ROOT / "benchmarks"
SYSTEMS = ("direct", "vllm-server", "ray-serve-llm", "switchyard")
LABELS = {
    "direct": "vLLM AsyncLLM in-process (ceiling)",
    "vllm-server": "vLLM OpenAI server",
    "ray-serve-llm": "Ray Serve LLM build_openai_app",
    "switchyard": "Switchyard gateway",
}
BEGIN_MARK = "<!-- serving_comparison:begin -->"
END_MARK = "<!-- serving_comparison:end -->"
ENGINE_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1"}


@dataclass(frozen=True)
class Run:
    """What every system's runner needs."""

    args: argparse.Namespace
    model_dir: Path
    name: str
    prompts: tuple[Prompt, ...]
    workdir: Path

    def plan(self, base_url: str, model: str) -> SweepPlan:
        warm = self.args.num_warmups
        return SweepPlan(
            endpoint=Endpoint(base_url, model),
            prompts=self.prompts[warm:],
            warmup_prompts=self.prompts[:warm],
            output_len=self.args.output_len,
            concurrency=self.args.concurrency,
            request_rate_per_s=None,
        )


class PrintProgress:
    """A plain-line SweepObserver: the script usually runs in the background into a log.
    With a `scope`, it also records each level's CPU seconds per process role."""

    def __init__(self, system: str, scope: Scope | None = None) -> None:
        self._system = system
        self._scope = scope
        self._before: dict[int, tuple[str, float]] = {}
        self._own_before = 0.0
        self.cpu_by_level: dict[int, dict[str, float]] = {}

    def level_started(self, label: str, total: int) -> None:
        print(f"{self._system}: {label} ({total} requests) ...", flush=True)
        if self._scope is not None:
            self._before = cpu_seconds(self._scope)
            self._own_before = own_cpu_seconds()

    def request_done(self, record: RequestRecord) -> None:
        return None

    def level_finished(self, metrics: LevelMetrics | None) -> None:
        if metrics is not None and self._scope is not None:
            used = cpu_by_role(self._before, cpu_seconds(self._scope))
            used["load generator (bench client)"] = round(own_cpu_seconds() - self._own_before, 2)
            self.cpu_by_level[metrics.concurrency] = used
        if metrics is not None:
            ttft = metrics.ttft.p50_ms if metrics.ttft else float("nan")
            print(
                f"{self._system}: concurrency {metrics.concurrency}: "
                f"{metrics.output_tokens_per_s:,.1f} tok/s, TTFT p50 {ttft:,.1f} ms, "
                f"{metrics.failed} failed",
                flush=True,
            )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_ready(url: str, proc: subprocess.Popen[bytes] | None, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before it was ready")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=5).status_code == 200:
                return
        time.sleep(2)
    raise TimeoutError(f"{url} was not ready after {timeout_s:.0f} s")


@contextlib.contextmanager
def process_group(command: list[str], log: Path, env: dict[str, str]) -> Iterator[Any]:
    """Run `command` in its own process group and stop that whole group afterwards."""
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            yield proc
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
            # Engine-core children share the group; make sure none outlives the server.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)


def engine_env() -> dict[str, str]:
    return {**os.environ, **ENGINE_ENV, "HF_HUB_OFFLINE": "1"}


def sweep_http(
    run: Run, system: str, base_url: str, model: str, scope: Scope
) -> list[dict[str, Any]]:
    progress = PrintProgress(system, scope if run.args.cpu_breakdown else None)
    results = asyncio.run(run_sweep(run.plan(base_url, model), progress))
    levels = []
    for result in results:
        level = result.metrics.to_json()
        if result.metrics.concurrency in progress.cpu_by_level:
            level["cpu_s_by_role"] = progress.cpu_by_level[result.metrics.concurrency]
        levels.append(level)
    return levels


# ---------------------------------------------------------------------------- the systems
def run_direct(run: Run) -> dict[str, Any]:
    out = run.workdir / "direct.json"
    command = [
        sys.executable, str(BENCH_DIR / "direct_engine.py"),
        "--model-dir", str(run.model_dir), "--name", run.name,
        "--prompts", str(run.workdir / "prompts.json"),
        "--output-len", str(run.args.output_len),
        "--concurrency", ",".join(map(str, run.args.concurrency)),
        "--num-warmups", str(run.args.num_warmups), "--out", str(out),
    ]  # fmt: skip
    with process_group(command, run.workdir / "direct.log", engine_env()) as proc:
        proc.wait(timeout=run.args.system_timeout_s)
        if proc.returncode != 0:
            raise RuntimeError(f"direct_engine.py exited {proc.returncode}; see direct.log")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def run_vllm_server(run: Run) -> dict[str, Any]:
    port = free_port()
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(run.model_dir), "--served-model-name", run.name,
        "--host", "127.0.0.1", "--port", str(port), "--enforce-eager",
    ]  # fmt: skip
    base = f"http://127.0.0.1:{port}/v1"
    launched = time.perf_counter()
    with process_group(command, run.workdir / "vllm-server.log", engine_env()) as proc:
        wait_ready(f"{base}/models", proc, run.args.start_timeout_s)
        start_s = time.perf_counter() - launched
        levels = sweep_http(run, "vllm-server", base, run.name, group_scope(proc.pid))
    return {"start_s": start_s, "levels": levels}


def run_ray_serve_llm(run: Run) -> dict[str, Any]:
    from cluster.ray_runtime import LocalHeadConfig, start_local_head, stop_local_head

    state = run.workdir / "ray-serve-llm"
    port = free_port()
    # Ray's own defaults: the baseline is Ray Serve LLM as its users get it.
    head = LocalHeadConfig(
        port=free_port(), dashboard_port=free_port(), standin_slots=0, serve_tuning=False
    )
    launched = time.perf_counter()
    connection = start_local_head(head, state)
    try:
        command = [
            sys.executable, str(BENCH_DIR / "ray_serve_llm_app.py"),
            "--address", connection.address, "--model-dir", str(run.model_dir),
            "--name", run.name, "--port", str(port),
        ]  # fmt: skip
        with (run.workdir / "ray-serve-llm.log").open("wb") as log:
            subprocess.run(
                command, stdout=log, stderr=subprocess.STDOUT, env=engine_env(),
                timeout=run.args.start_timeout_s, check=True,
            )  # fmt: skip
        base = f"http://127.0.0.1:{port}/v1"
        wait_ready(f"{base}/models", None, run.args.start_timeout_s)
        start_s = time.perf_counter() - launched
        levels = sweep_http(run, "ray-serve-llm", base, run.name, ray_session_scope(state))
    finally:
        stop_local_head(state)
    return {"start_s": start_s, "levels": levels}


def run_switchyard(run: Run) -> dict[str, Any]:
    switchyard = str(Path(sys.executable).with_name("switchyard"))
    state = run.workdir / "switchyard"
    port = free_port()
    env = {**engine_env(), "SWITCHYARD_HOME": str(state)}
    env.pop("RAY_ADDRESS", None)
    up = [
        switchyard, "up", "--detach", "--model", f"miniature:{run.args.miniature}",
        "--port", str(port), "--ray-port", str(free_port()),
        "--dashboard-port", str(free_port()), "--state-dir", str(state),
    ]  # fmt: skip
    launched = time.perf_counter()
    try:
        with (run.workdir / "switchyard.log").open("wb") as log:
            subprocess.run(
                up, stdout=log, stderr=subprocess.STDOUT, env=env,
                timeout=run.args.start_timeout_s, check=True,
            )  # fmt: skip
        start_s = time.perf_counter() - launched
        base = f"http://127.0.0.1:{port}/v1"
        levels = sweep_http(run, "switchyard", base, "default", ray_session_scope(state))
    finally:
        subprocess.run(
            [switchyard, "down", "--state-dir", str(state)],
            env=env, capture_output=True, timeout=300, check=False,
        )  # fmt: skip
    return {"start_s": start_s, "levels": levels}


RUNNERS: dict[str, Callable[[Run], dict[str, Any]]] = {
    "direct": run_direct,
    "vllm-server": run_vllm_server,
    "ray-serve-llm": run_ray_serve_llm,
    "switchyard": run_switchyard,
}


# ---------------------------------------------------------------------------- the record
def machine() -> dict[str, Any]:
    model = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    versions = {}
    for package in ("vllm", "ray", "torch", "transformers"):
        with contextlib.suppress(Exception):
            from importlib.metadata import version

            versions[package] = version("vllm-cpu" if package == "vllm" else package)
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "versions": versions,
    }


def ratio(value: float, reference: float | None) -> str:
    return f"{value / reference:.2f}x" if reference else "-"


def markdown_table(document: dict[str, Any]) -> str:
    systems: dict[str, Any] = document["systems"]
    by_level: dict[str, dict[int, LevelMetrics]] = {
        s: {m.concurrency: m for m in map(LevelMetrics.from_json, r.get("levels", []))}
        for s, r in systems.items()
    }
    lines = [
        "| system | concurrency | output tok/s | vs direct | vs vLLM server | TTFT p50 ms "
        "| TTFT p99 ms | TPOT p50 ms | ITL p50 ms | E2E p50 ms | failed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for level in document["config"]["concurrency"]:
        direct = _tok_s(by_level.get("direct", {}).get(level))
        server = _tok_s(by_level.get("vllm-server", {}).get(level))
        for system in systems:
            m = by_level[system].get(level)
            if m is None:
                continue
            lines.append(
                f"| {LABELS[system]} | {level} | {m.output_tokens_per_s:,.0f} "
                f"| {ratio(m.output_tokens_per_s, direct)} "
                f"| {ratio(m.output_tokens_per_s, server)} "
                f"| {_p(m.ttft, 'p50_ms')} | {_p(m.ttft, 'p99_ms')} | {_p(m.tpot, 'p50_ms')} "
                f"| {_p(m.itl, 'p50_ms')} | {_p(m.e2el, 'p50_ms')} | {m.failed} |"
            )
    starts = ", ".join(
        f"{LABELS[s]} {r['start_s']:.0f} s" for s, r in systems.items() if "start_s" in r
    )
    errors = [f"- {LABELS[s]}: {r['error']}" for s, r in systems.items() if "error" in r]
    config = document["config"]
    header = [
        f"Run {document['date']} on {document['machine']['cpu']}, "
        f"{document['machine']['cores']} cores, {document['machine']['memory_gib']} GiB; "
        f"load average {document['load_before']} before, {document['load_after']} after "
        "(other jobs shared the machine).",
        "",
        f"Command: `{document['command']}`",
        "",
        f"Miniature `{config['miniature']}`, {config['num_prompts']} requests per level, "
        f"{config['input_len']} prompt tokens, {config['output_len']} output tokens "
        "(ignore_eos), all requests released at once and capped by the concurrency; versions "
        f"{document['machine']['versions']}.",
        "",
    ]
    footer = ["", f"Start-up to first ready (cold, this run): {starts}.", *cpu_lines(document)]
    if errors:
        footer += ["", "Systems that did not finish:", *errors]
    footer += ["", "![throughput and TTFT](benchmarks/results/serving_comparison.png)"]
    return "\n".join(header + lines + footer)


def cpu_lines(document: dict[str, Any]) -> list[str]:
    """CPU seconds per process role, per system and level, where they were recorded."""
    lines: list[str] = []
    for system, result in document["systems"].items():
        for level in result.get("levels", []):
            used = level.get("cpu_s_by_role")
            if not used:
                continue
            available = level["duration_s"] * (document["machine"]["cores"] or 1)
            parts = ", ".join(f"{role} {seconds:.1f}" for role, seconds in used.items())
            lines.append(
                f"- {LABELS[system]}, concurrency {level['concurrency']} "
                f"({level['duration_s']:.1f} s, {available:.0f} core-s): {parts}"
            )
    if lines:
        lines = ["", "CPU seconds per process during each level:", "", *lines]
    return lines


def _tok_s(metrics: LevelMetrics | None) -> float | None:
    return None if metrics is None else metrics.output_tokens_per_s


def _p(d: Any, field: str) -> str:
    return "-" if d is None else f"{getattr(d, field):,.1f}"


def write_markdown(path: Path, table: str) -> None:
    block = f"{BEGIN_MARK}\n{table}\n{END_MARK}"
    text = path.read_text() if path.exists() else f"# Benchmarks\n\n{block}\n"
    if BEGIN_MARK in text and END_MARK in text:
        before, rest = text.split(BEGIN_MARK, 1)
        _, after = rest.split(END_MARK, 1)
        text = before + block + after
    elif block not in text:
        text += f"\n{block}\n"
    path.write_text(text)


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


# ---------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--miniature", default="minimax-m2.5")
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--num-prompts", type=int, default=128)
    parser.add_argument("--num-warmups", type=int, default=8)
    parser.add_argument(
        "--concurrency", type=lambda s: tuple(int(x) for x in s.split(",")), default=(1, 32, 128)
    )
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/switchyard-serving-comparison"))
    parser.add_argument("--results", type=Path, default=BENCH_DIR / "results")
    parser.add_argument("--markdown", type=Path, default=REPO_ROOT / "BENCHMARKS.md")
    parser.add_argument("--start-timeout-s", type=float, default=900)
    parser.add_argument("--system-timeout-s", type=float, default=3600)
    parser.add_argument(
        "--cpu-breakdown",
        action="store_true",
        help="record CPU seconds per process role during each level (HTTP systems)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        raise SystemExit(f"--systems: unknown {unknown}; choose from {', '.join(SYSTEMS)}")
    from transformers import AutoTokenizer

    from cluster.miniature import ensure_miniature

    args.workdir.mkdir(parents=True, exist_ok=True)
    # The directory `switchyard up` stages this miniature into, so all four load the same files.
    model_dir = ensure_miniature(args.miniature, args.workdir / "switchyard/cache/miniatures")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompts = exact_length_prompts(
        tokenizer, count=args.num_warmups + args.num_prompts, input_len=args.input_len
    )
    (args.workdir / "prompts.json").write_text(
        json.dumps([{"text": p.text, "token_ids": tokenizer.encode(p.text)} for p in prompts])
    )
    run = Run(args, model_dir, f"mini-{args.miniature}", tuple(prompts), args.workdir)
    document: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(
            [
                "python",
                "benchmarks/serving_comparison.py",
                *(sys.argv[1:] if argv is None else argv),
            ]
        ),
        "machine": machine(),
        "load_before": load_average(),
        "config": {
            "miniature": args.miniature,
            "input_len": args.input_len,
            "output_len": args.output_len,
            "num_prompts": args.num_prompts,
            "num_warmups": args.num_warmups,
            "concurrency": list(args.concurrency),
            "engine_env": ENGINE_ENV,
            "enforce_eager": True,
        },
        "systems": {},
    }
    for system in systems:
        print(f"== {system}: {LABELS[system]} (load {load_average()})", flush=True)
        try:
            document["systems"][system] = RUNNERS[system](run)
            for level in document["systems"][system]["levels"]:
                print(
                    f"{system}: concurrency {level['concurrency']}: "
                    f"{level['output_tokens_per_s']:,.1f} output tok/s",
                    flush=True,
                )
        except Exception as exc:  # one system failing must not lose the others' numbers
            print(f"{system} failed: {exc!r}", flush=True)
            document["systems"][system] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    document["load_after"] = load_average()
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "serving_comparison.json").write_text(json.dumps(document, indent=2))
    series = {
        LABELS[s]: [LevelMetrics.from_json(level) for level in r["levels"]]
        for s, r in document["systems"].items()
        if r.get("levels")
    }
    if series:
        plot_series(
            args.results / "serving_comparison.png",
            series,
            title=f"{run.name}: {args.input_len} in / {args.output_len} out tokens, "
            f"{args.num_prompts} requests",
        )
    write_markdown(args.markdown, markdown_table(document))
    print(f"wrote {args.results}/serving_comparison.json, .png and {args.markdown}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
