"""Where a deployment's start-up time goes, step by step, from what Ray and vLLM report.

Pure: Ray's worker timestamps and the replica's log lines in, `StartupSteps` out. The
steps, in order:

- `scheduling`: from the deploy to Ray launching the replica's process (its placement
  group waited for accelerators, then Serve placed the replica);
- `replica_process`: that process starting until Ray calls it ready;
- `engine_start`: the replica building its engine: imports, the engine and worker
  processes, until the model starts to load (vLLM's "Starting to load model");
- `weight_load`: the model built and its weights read (vLLM's "Model loading took", or
  "Initializing model took" plus "Loading weights took" where that total is not logged);
- `kv_cache`: profiling, the KV cache allocation and the engine's own warm-up (vLLM's
  "init engine (profile, create kv cache, warmup model) took");
- `compile`: torch.compile and CUDA graph capture (vLLM's "torch.compile takes" and
  "Graph capturing finished in"); absent (None) when the engine runs eager, as on the CPU;
- `replica_ready`: the rest until Serve reports the application running (the replica's
  health check and direct HTTP port);
- `warm_up`: Switchyard's one real request through the new app.

A step the reports do not show (a fake engine loads no weights) is None, never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

STEPS = (
    "scheduling",
    "replica_process",
    "engine_start",
    "weight_load",
    "kv_cache",
    "compile",
    "replica_ready",
    "warm_up",
)

_STAMP = re.compile(r"(?:INFO|WARNING|DEBUG|ERROR) (\d\d-\d\d \d\d:\d\d:\d\d)")
_LOAD_START = "Starting to load model"
_SECONDS = r"([0-9]+(?:\.[0-9]+)?)"
_WEIGHT_LOAD = (
    re.compile(rf"Initializing model took {_SECONDS} seconds"),
    re.compile(rf"Loading weights took {_SECONDS} seconds"),
    re.compile(rf"Model loading took [0-9.]+ GiB(?: memory)? and {_SECONDS} seconds"),
)
_KV_CACHE = re.compile(rf"init engine \(profile, create kv cache, warmup model\) took {_SECONDS}")
_COMPILE = (
    re.compile(rf"torch\.compile takes {_SECONDS} s in total"),
    re.compile(rf"Graph capturing finished in {_SECONDS} sec"),
)
_EAGER = "Enforce eager set"


@dataclass(frozen=True)
class WorkerTimes:
    """Ray's timestamps of the replica's worker process (Unix seconds)."""

    launch_requested: float
    ready: float


@dataclass(frozen=True)
class EngineLog:
    """What the replica's log says of its engine's start."""

    load_started: float | None
    """Unix time of "Starting to load model" (whole seconds, as vLLM logs)."""
    weight_load_s: float | None
    kv_cache_s: float | None
    compile_s: float | None
    eager: bool
    ready: float | None
    """Unix time of the last of those lines: the engine is up."""


def parse_engine_log(lines: Iterable[str], year: int) -> EngineLog:
    """vLLM's start-up lines of one replica's log (its own, its engine's, its workers')."""
    load_started = ready = None
    weight = whole_load = kv = compile_s = None
    eager = False
    for line in lines:
        stamp = _stamp(line, year)
        if _LOAD_START in line and load_started is None:
            load_started = stamp
        for pattern in _WEIGHT_LOAD[:2]:
            found = pattern.search(line)
            if found:
                weight = (weight or 0.0) + float(found[1])
                ready = stamp or ready
        found = _WEIGHT_LOAD[2].search(line)
        if found:
            # The GPU worker's total of the two above, when it logs it.
            whole_load = float(found[1])
            ready = stamp or ready
        found = _KV_CACHE.search(line)
        if found:
            kv = float(found[1])
            ready = stamp or ready
        for pattern in _COMPILE:
            found = pattern.search(line)
            if found:
                compile_s = (compile_s or 0.0) + float(found[1])
                ready = stamp or ready
        if _EAGER in line:
            eager = True
    weight = whole_load if whole_load is not None else weight
    return EngineLog(load_started, weight, kv, compile_s, eager, ready)


def _stamp(line: str, year: int) -> float | None:
    found = _STAMP.search(line)
    if found is None:
        return None
    return datetime.strptime(f"{year}-{found[1]}", "%Y-%m-%d %H:%M:%S").timestamp()


@dataclass(frozen=True)
class StartupSteps:
    seconds: dict[str, float | None]
    """Every step of STEPS, in order; None where the reports do not show it."""

    def describe(self) -> str:
        parts = []
        for step in STEPS:
            value = self.seconds.get(step)
            parts.append(f"{step} {'absent' if value is None else f'{value:.1f} s'}")
        return ", ".join(parts)


def startup_steps(
    *,
    deploy_started: float,
    running: float,
    worker: WorkerTimes | None,
    engine: EngineLog | None,
    warm_up_s: float,
) -> StartupSteps:
    """The steps of one start from its deploy (Unix time) to Serve's RUNNING, then the
    warm-up. Between known marks, what is left is attributed to the step it belongs to."""
    seconds: dict[str, float | None] = dict.fromkeys(STEPS)
    seconds["warm_up"] = warm_up_s
    if worker is None:
        seconds["scheduling"] = running - deploy_started
        return StartupSteps(seconds)
    seconds["scheduling"] = max(worker.launch_requested - deploy_started, 0.0)
    seconds["replica_process"] = max(worker.ready - worker.launch_requested, 0.0)
    engine_up = worker.ready
    if engine is not None and engine.load_started is not None:
        seconds["engine_start"] = max(engine.load_started - worker.ready, 0.0)
        seconds["weight_load"] = engine.weight_load_s
        seconds["kv_cache"] = engine.kv_cache_s
        seconds["compile"] = None if engine.eager else engine.compile_s
        engine_up = max(engine.ready or engine.load_started, engine.load_started)
    seconds["replica_ready"] = max(running - engine_up, 0.0)
    return StartupSteps(seconds)
