"""Swap strategies against a cold start of the same model, in one run on one machine.

One stack (`switchyard up`, OLD's miniature as `default`), both miniatures staged first:

1. cold start: `switchyard add miniature:NEW --name mini-NEW-cold` beside OLD, with a client
   asking for that name every 0.2 s; from the manager's first event for the add (the CLI's
   own start-up excluded) to the first successful request. Then NEW-cold is parked
   (`switchyard park`: drain and unload) and one request for it is sent: it is held at the
   gateway while the manager wakes it (a cold start, park mode `unload`) and answered by
   it; the request's wait and the manager's wake (admission to warmed) are recorded. Then
   NEW-cold is removed.
2. three swaps OLD -> NEW under a steady load on `default` (`switchyard bench --during-swap`),
   an unmeasured swap back before each of the later two:
   - `auto`, which picks make-before-break (NEW fits beside OLD);
   - forced break-before-make as it was before this change: `--no-prefetch
     --no-early-deploy` (NEW's app created only once OLD's accelerators are free);
   - forced break-before-make as it is now: NEW's weights read into the page cache before
     the drain, NEW's app created before OLD's is deleted.

Reported per swap: how long `default` had no model (the manager's figure), what clients saw
(unavailability, longest held request, longest gap between completions), failed and held
requests, and NEW's start split into sub-phases. Results go to
benchmarks/results/swap_time.json and the suite's block in BENCHMARKS.md.

    .venv/bin/python -m benchmarks run swap-time          # ~8-12 min on 2 cores

Not a test: nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.comparison_systems import free_port
from benchmarks.records import load_average, run_record, write_block
from benchmarks.stack_cli import switchyard_cli as _cli
from benchmarks.suites import BENCHMARKS_MD, RESULTS, suite_of

SUITE = suite_of(__name__)
POLL_S = 0.2


class FirstSuccess:
    """Asks for `model` every POLL_S seconds in a thread; records the first 200's time."""

    def __init__(self, base_url: str, model: str) -> None:
        self._url = base_url + "/completions"
        self._model = model
        self._stop = threading.Event()
        self.at: float | None = None
        self.attempts = 0
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> FirstSuccess:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def wait(self, timeout_s: float) -> float | None:
        deadline = time.monotonic() + timeout_s
        while self.at is None and time.monotonic() < deadline:
            time.sleep(POLL_S)
        return self.at

    def _poll(self) -> None:
        body = {"model": self._model, "prompt": "hello", "max_tokens": 1}
        with httpx.Client(timeout=30) as client:
            while not self._stop.is_set() and self.at is None:
                self.attempts += 1
                try:
                    if client.post(self._url, json=body).status_code == 200:
                        self.at = time.time()
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(POLL_S)


def cold_start(state: Path, base_url: str, new: str, name: str) -> dict[str, Any]:
    with FirstSuccess(base_url, name) as probe:
        launched = time.time()
        added = _cli(state, "add", f"miniature:{new}", "--name", name, "--json")
        first = probe.wait(120)
    if added.returncode != 0:
        raise RuntimeError(f"add {name} failed: {added.stdout[-500:]}")
    operation = json.loads(added.stdout)
    began = float(operation["events"][0]["at"])
    if first is None:
        raise RuntimeError(f"{name} never answered after its add")
    return {
        "cold_start_s": first - began,
        "cold_start_with_cli_s": first - launched,
        "phase_seconds": operation["phase_seconds"],
        "startup_steps": (operation.get("details") or {}).get("startup_steps"),
        "probe_attempts": probe.attempts,
    }


def park_and_wake(state: Path, base_url: str, name: str) -> dict[str, Any]:
    """Park `name`, then time one request for it: held while a request-triggered wake runs."""
    parked = _cli(state, "park", name, "--json")
    if parked.returncode != 0:
        raise RuntimeError(f"park {name} failed: {parked.stdout[-500:]}")
    park = json.loads(parked.stdout)
    body = {"model": name, "prompt": "hello", "max_tokens": 1}
    sent = time.time()
    answer = httpx.post(base_url + "/completions", json=body, timeout=900)
    waited = time.time() - sent
    status = _cli(state, "status", "--json")
    models = json.loads(status.stdout)["models"] if status.returncode == 0 else []
    woken: dict[str, Any] = next((m for m in models if m["name"] == name), {})
    return {
        "park_s": sum(park["phase_seconds"].values()),
        "park_phase_seconds": park["phase_seconds"],
        "request_status": answer.status_code,
        "request_wait_s": waited,
        "wake_s": woken.get("last_wake_s"),
    }


@dataclass(frozen=True)
class SwapRun:
    """One measured swap: `bench --during-swap OLD SOURCE --name NEW` plus strategy flags."""

    key: str
    title: str
    old: str
    new_source: str
    new: str
    flags: tuple[str, ...]


def swap_window(state: Path, base_url: str, args: argparse.Namespace, run: SwapRun) -> Any:
    out = args.workdir / f"{run.key}.json"
    result = _cli(
        state,
        "bench",
        "--url", base_url,
        "--model", "default",
        "--concurrency", str(args.concurrency),
        "--num-prompts", "32",
        "--input-len", str(args.input_len),
        "--output-len", str(args.output_len),
        "--swap-delay", "10",
        "--swap-tail", "10",
        "--during-swap", run.old, run.new_source,
        "--name", run.new,
        *run.flags,
        "--json", str(out),
        state_flag=False,
    )  # fmt: skip
    print(result.stdout, flush=True)
    document: dict[str, Any] = json.loads(out.read_text())
    # Every request's timeline stays in the workdir's file; the results keep the summary.
    document["requests"] = f"{len(document.pop('requests', []))} requests, in {out}"
    document["exit_code"] = result.returncode
    document["title"] = run.title
    document["flags"] = list(run.flags)
    return document


def swap_back(state: Path, old: str, source: str, new: str) -> dict[str, Any]:
    """An unmeasured swap that puts OLD's model back on `default` for the next run."""
    result = _cli(state, "swap", old, source, "--name", new, "--json")
    if result.returncode != 0:
        raise RuntimeError(f"swap {old} -> {new} failed: {result.stdout[-500:]}")
    back: dict[str, Any] = json.loads(result.stdout)
    return back


def swap_runs(args: argparse.Namespace) -> list[tuple[SwapRun, tuple[str, str, str] | None]]:
    """The measured swaps, each OLD -> NEW in the same direction, and the swap back that
    precedes it (old, source, new) so every run starts from OLD serving `default`."""
    old, new = f"mini-{args.old}", f"mini-{args.new}"
    source_old, source_new = f"miniature:{args.old}", f"miniature:{args.new}"
    bbm = ("--strategy", "break-before-make")
    return [
        (SwapRun("mbb", "make-before-break (auto)", old, source_new, new, ()), None),
        (
            SwapRun(
                "bbm_before",
                "break-before-make, before: no prefetch, NEW deployed after OLD is gone",
                f"{old}-b",
                source_new,
                f"{new}-c",
                (*bbm, "--no-prefetch", "--no-early-deploy"),
            ),
            (new, source_old, f"{old}-b"),
        ),
        (
            SwapRun(
                "bbm_after",
                "break-before-make, after: page-cache prefetch, NEW deployed before OLD is deleted",
                f"{old}-d",
                source_new,
                f"{new}-e",
                bbm,
            ),
            (f"{new}-c", source_old, f"{old}-d"),
        ),
    ]


def _step(steps: dict[str, float | None] | None, name: str) -> str:
    if not steps or name not in steps:
        return "-"
    value = steps[name]
    return "absent" if value is None else f"{value:.1f}"


def markdown(document: dict[str, Any]) -> str:
    m, cold, config = document["machine"], document["cold"], document["config"]
    lines = [
        f"Run {document['date']} on {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; "
        f"load average {document['load_before']} before, {document['load_after']} after.",
        "",
        f"Command: `{document['command']}`",
        "",
        f"OLD `mini-{config['old']}` serving `default`; NEW `miniature:{config['new']}` "
        "(weights staged before every measurement); every swap OLD -> NEW in the same "
        f"direction (an unmeasured swap back between runs); steady load of "
        f"{config['concurrency']} streaming clients, {config['input_len']} in / "
        f"{config['output_len']} out tokens, during each swap.",
        "",
        f"NEW's cold start (add beside OLD: operation start -> first successful request): "
        f"**{cold['cold_start_s']:.1f} s** ({cold['cold_start_with_cli_s']:.1f} s with the "
        "CLI's start-up).",
        "",
        *_park_wake_lines(document.get("park_wake"), cold["cold_start_s"]),
        "| swap | strategy | alias unavailable (manager) | clients' unavailability "
        "| longest held | hold / cold start | longest gap between completions "
        "| NEW's deploying_new | ok / failed / held |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for key in ("mbb", "bbm_before", "bbm_after"):
        run = document["swaps"][key]
        window, operation = run["window"], run["swap"] or {}
        unavailable = _longest(operation.get("alias_unavailable_s"))
        phases = operation.get("phase_seconds", {})
        lines.append(
            f"| {run['title']} | {operation.get('strategy', '-')} | {_s(unavailable)} "
            f"| {_s(window['unavailability_s'])} | {_s(window['longest_held_s'])} "
            f"| {_ratio(unavailable, cold['cold_start_s'])} "
            f"| {_s(_seconds(window['longest_completion_gap']))} "
            f"| {_s(phases.get('deploying_new'))} "
            f"| {window['succeeded']} / {window['failed']} / {window['held_requests']} |"
        )
    lines += [
        "",
        "Where NEW's start went (seconds; `cluster/fleet/startup_steps.py` reads them from Ray's "
        "actor and worker records and the replica's vLLM log):",
        "",
        "| step | cold start | make-before-break | break-before-make before "
        "| break-before-make after |",
        "|---|---:|---:|---:|---:|",
    ]
    columns = [cold.get("startup_steps")] + [
        (document["swaps"][k]["swap"] or {}).get("startup_steps")
        for k in ("mbb", "bbm_before", "bbm_after")
    ]
    from cluster.fleet.startup_steps import STEPS

    for name in STEPS:
        lines.append(f"| {name} | " + " | ".join(_step(c, name) for c in columns) + " |")
    lines.append("")
    for key in ("mbb", "bbm_before", "bbm_after"):
        run = document["swaps"][key]
        operation = run["swap"] or {"outcome": "manager died", "phase_seconds": {}}
        phases = ", ".join(f"{k} {v:.1f} s" for k, v in operation["phase_seconds"].items())
        lines.append(f"- {run['title']}: {operation['outcome']}; phases: {phases}.")
    return "\n".join(lines)


def _park_wake_lines(park_wake: dict[str, Any] | None, cold_s: float) -> list[str]:
    if park_wake is None:
        return []
    wait = park_wake["request_wait_s"]
    return [
        f"The same model parked (`switchyard park`: drain and unload) in "
        f"**{park_wake['park_s']:.1f} s**; a request for it while parked was held at the "
        f"gateway and answered (HTTP {park_wake['request_status']}) after "
        f"**{wait:.1f} s** ({_ratio(wait, cold_s)} its cold start), the manager's wake "
        f"(admission to warmed, a cold start for park mode `unload`) taking "
        f"{_s(park_wake['wake_s'])} s.",
        "",
    ]


def _seconds(gap: dict[str, float] | None) -> float | None:
    return None if gap is None else gap["seconds"]


def _longest(per_alias: dict[str, float] | None) -> float | None:
    """The longest any alias of the swap had no model (the manager's figure)."""
    return max(per_alias.values()) if per_alias else None


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _ratio(value: float | None, reference: float) -> str:
    return "-" if value is None or reference <= 0 else f"{value / reference:.2f}x"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=SUITE.command, description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default="kimi-k2.5", help="OLD's miniature (serves first)")
    parser.add_argument("--new", default="minimax-m2.5", help="NEW's miniature")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--input-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=16)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/switchyard-swap-time"))
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--markdown", type=Path, default=BENCHMARKS_MD)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    from cluster.miniature_generator import ensure_miniature
    from cluster.staging.cache_layout import CacheLayout

    args.workdir.mkdir(parents=True, exist_ok=True)
    state = args.workdir / "state"
    # Staged where `up`/`add`/`swap` look, so neither measurement generates weights.
    for name in (args.old, args.new):
        ensure_miniature(name, CacheLayout(state / "cache").miniatures_dir)
    port, ray_port, dashboard_port = free_port(), free_port(), free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    document: dict[str, Any] = {
        **run_record(SUITE, argv),
        "config": {
            "old": args.old,
            "new": args.new,
            "concurrency": args.concurrency,
            "input_len": args.input_len,
            "output_len": args.output_len,
        },
    }
    started = time.time()
    up = _cli(
        state, "up", "--detach", "--model", f"miniature:{args.old}",
        "--port", str(port), "--ray-port", str(ray_port),
        "--dashboard-port", str(dashboard_port),
    )  # fmt: skip
    try:
        if up.returncode != 0:
            raise RuntimeError("switchyard up failed")
        document["up_s"] = time.time() - started
        cold_name = f"mini-{args.new}-cold"
        document["cold"] = cold_start(state, base_url, args.new, cold_name)
        print(f"cold start: {document['cold']}", flush=True)
        document["park_wake"] = park_and_wake(state, base_url, cold_name)
        print(f"park and wake: {document['park_wake']}", flush=True)
        removed = _cli(state, "remove", cold_name)
        if removed.returncode != 0:
            raise RuntimeError(f"remove {cold_name} failed")
        document["swaps"] = {}
        for run, back in swap_runs(args):
            if back is not None:
                document.setdefault("swaps_back", []).append(swap_back(state, *back))
            document["swaps"][run.key] = swap_window(state, base_url, args, run)
    finally:
        _cli(state, "down", timeout_s=600)
    document["load_after"] = load_average()
    cold = document["cold"]["cold_start_s"]
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / SUITE.result.name).write_text(json.dumps(document, indent=2) + "\n")
    write_block(args.markdown, SUITE, markdown(document))
    for key, run in document["swaps"].items():
        operation = run["swap"] or {}
        print(
            f"{key}: strategy {operation.get('strategy')}, alias unavailable "
            f"{_s(_longest(operation.get('alias_unavailable_s')))} s against a cold start "
            f"of {cold:.1f} s, "
            f"failed {run['window']['failed']}, held {run['window']['held_requests']}",
            flush=True,
        )
    return 0
