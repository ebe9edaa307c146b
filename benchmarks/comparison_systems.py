"""The systems the serving-comparison suite compares: how each is started, loaded and stopped.

Each runner starts its system on free local ports, waits until it answers, runs the same
sweep against it and stops it (with every process it spawned) before the next one starts,
so two engines never share the machine. It returns the system's result record: start-up
seconds and the metrics of each concurrency level.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.cpu_accounting import (
    Scope,
    cpu_by_role,
    cpu_seconds,
    group_scope,
    own_cpu_seconds,
    ray_session_scope,
)
from switchyard.bench.client import Endpoint
from switchyard.bench.level_metrics import LevelMetrics
from switchyard.bench.prompts import Prompt
from switchyard.bench.request_record import RequestRecord
from switchyard.bench.sweep import SweepPlan, run_sweep

SYSTEMS = ("direct", "vllm-server", "ray-serve-llm", "switchyard")
LABELS = {
    "direct": "vLLM AsyncLLM in-process (ceiling)",
    "vllm-server": "vLLM OpenAI server",
    "ray-serve-llm": "Ray Serve LLM build_openai_app",
    "switchyard": "Switchyard gateway",
    "switchyard-baseline": "Switchyard gateway, baseline checkout",
}
BASELINE = "switchyard-baseline"
"""`switchyard up` run from another checkout (`--baseline DIR`): before and after, side by side."""
GATEWAY_ROLE = "ray::ServeReplica:switchyard-gateway:"
"""How the gateway replica's process role starts (`cpu_accounting.role_of`); the deployment's
name after it has changed between versions."""


def gateway_cpu_s(roles: dict[str, float]) -> float:
    """CPU seconds of the gateway replicas among `roles` (`cpu_accounting.cpu_by_role`)."""
    return sum(seconds for role, seconds in roles.items() if role.startswith(GATEWAY_ROLE))


ENGINE_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "auto"}
"""What Switchyard's CPU accelerator defaults give its engines (1 GiB of KV cache, vLLM's
automatic thread binding); the other systems get the same."""
ENGINE_ARGS: dict[str, Any] = {
    "max_model_len": 512,
    "max_num_seqs": 128,
    "max_num_batched_tokens": 4096,
    "enforce_eager": True,
}
"""The engine arguments every system runs with, set explicitly: vLLM picks different
defaults for its API server than for an engine built in-process (its usage context), which
made the first comparisons unequal. Ray Serve LLM keeps its own defaults (its baseline)."""


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


def vllm_cli_args(engine_args: dict[str, Any]) -> list[str]:
    """`{"max_num_seqs": 128, "enforce_eager": True}` -> `--max-num-seqs 128 --enforce-eager`."""
    out: list[str] = []
    for key, value in engine_args.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is not False:
            out += [flag, str(value)]
    return out


def engine_config_line(logs: list[Path]) -> str:
    """The engine's own record of its configuration (vLLM logs it as the engine core
    starts), so the JSON shows what each system really ran with."""
    for log in logs:
        with contextlib.suppress(OSError):
            for line in log.read_text(errors="replace").splitlines():
                if "Initializing a V1 LLM engine" in line:
                    return line.split("with config:", 1)[-1].strip()[:2000]
    return ""


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


def run_direct(run: Run) -> dict[str, Any]:
    out = run.workdir / "direct.json"
    command = [
        sys.executable, "-m", "benchmarks.direct_engine",
        "--model-dir", str(run.model_dir), "--name", run.name,
        "--prompts", str(run.workdir / "prompts.json"),
        "--output-len", str(run.args.output_len),
        "--concurrency", ",".join(map(str, run.args.concurrency)),
        "--num-warmups", str(run.args.num_warmups), "--out", str(out),
        "--engine-args", json.dumps(ENGINE_ARGS),
    ]  # fmt: skip
    with process_group(command, run.workdir / "direct.log", engine_env()) as proc:
        proc.wait(timeout=run.args.system_timeout_s)
        if proc.returncode != 0:
            raise RuntimeError(f"benchmarks.direct_engine exited {proc.returncode}; see direct.log")
    result: dict[str, Any] = json.loads(out.read_text())
    result["engine_config"] = engine_config_line([run.workdir / "direct.log"])
    return result


def run_vllm_server(run: Run) -> dict[str, Any]:
    port = free_port()
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(run.model_dir), "--served-model-name", run.name,
        "--host", "127.0.0.1", "--port", str(port), *vllm_cli_args(ENGINE_ARGS),
        # The reasoning parser Switchyard's recipe gives MiniMax models (policies/recipes.py),
        # so both engines log the same configuration.
        *(["--reasoning-parser", "minimax_m2"] if run.args.miniature.startswith("minimax") else []),
    ]  # fmt: skip
    base = f"http://127.0.0.1:{port}/v1"
    launched = time.perf_counter()
    with process_group(command, run.workdir / "vllm-server.log", engine_env()) as proc:
        wait_ready(f"{base}/models", proc, run.args.start_timeout_s)
        start_s = time.perf_counter() - launched
        levels = sweep_http(run, "vllm-server", base, run.name, group_scope(proc.pid))
    log = run.workdir / "vllm-server.log"
    return {"start_s": start_s, "levels": levels, "engine_config": engine_config_line([log])}


def run_ray_serve_llm(run: Run) -> dict[str, Any]:
    from cluster.startup.ray_runtime import LocalHeadConfig, start_local_head, stop_local_head

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
            sys.executable, "-m", "benchmarks.ray_serve_llm_app",
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
    return _switchyard(run, "switchyard", code=None)


def run_switchyard_baseline(run: Run) -> dict[str, Any]:
    return _switchyard(run, BASELINE, code=run.args.baseline)


def _switchyard(run: Run, system: str, *, code: Path | None) -> dict[str, Any]:
    """`switchyard up` with the fleet of one miniature; `code`: another checkout's
    Switchyard, run from there (Ray puts its driver's working directory first on its workers'
    `sys.path`, so PYTHONPATH alone would run this checkout's code in the replicas)."""
    switchyard = str(Path(sys.executable).with_name("switchyard"))
    state = run.workdir / system
    cache = run.workdir / "switchyard" / "cache"
    if system != "switchyard" and not (state / "cache").exists():
        # The same staged miniature as the other stack: the same files, loaded the same way.
        state.mkdir(parents=True, exist_ok=True)
        (state / "cache").symlink_to(cache, target_is_directory=True)
    port = free_port()
    env = {**engine_env(), "SWITCHYARD_HOME": str(state)}
    env.pop("RAY_ADDRESS", None)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code), env.get("PYTHONPATH", "")]).rstrip(":")
    fleet = run.workdir / f"{system}-fleet.yaml"
    fleet.write_text(
        json.dumps(  # JSON is YAML
            {
                "models": [
                    {
                        "name": run.name,
                        "source": f"miniature:{run.args.miniature}",
                        "aliases": ["default"],
                        "engine": ENGINE_ARGS,
                    }
                ]
            }
        )
    )
    up = [
        switchyard, "up", "--detach", "-f", str(fleet),
        "--port", str(port), "--ray-port", str(free_port()),
        "--dashboard-port", str(free_port()), "--state-dir", str(state),
    ]  # fmt: skip
    launched = time.perf_counter()
    try:
        with (run.workdir / f"{system}.log").open("wb") as log:
            subprocess.run(
                up, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=code,
                timeout=run.args.start_timeout_s, check=True,
            )  # fmt: skip
        start_s = time.perf_counter() - launched
        base = f"http://127.0.0.1:{port}/v1"
        levels = sweep_http(run, system, base, "default", ray_session_scope(state))
        session = json.loads((state / "local_head.json").read_text()).get("session_dir", "")
        config = engine_config_line(sorted(Path(session, "logs").glob("worker-*")))
        # The model's path as the other stack names the same files (not through the link).
        config = config.replace(str(state / "cache"), str(cache))
    finally:
        subprocess.run(
            [switchyard, "down", "--state-dir", str(state)],
            env=env, capture_output=True, timeout=300, check=False, cwd=code,
        )  # fmt: skip
    return {"start_s": start_s, "levels": levels, "engine_config": config}


RUNNERS: dict[str, Callable[[Run], dict[str, Any]]] = {
    "direct": run_direct,
    "vllm-server": run_vllm_server,
    "ray-serve-llm": run_ray_serve_llm,
    "switchyard": run_switchyard,
    BASELINE: run_switchyard_baseline,
}
