"""Hot-swap unavailability against a cold start of the same model, in one run on one machine.

One stack (`switchyard up`, OLD's miniature as `default`), both miniatures staged first:

1. cold start: `switchyard add miniature:NEW --name mini-NEW-cold` beside OLD, with a client
   asking for that name every 0.2 s; the cold start is from the manager's first event for the
   add (the operation began; the CLI's own start-up is not counted) to the first successful
   request. The command-inclusive time is recorded too. Then NEW-cold is removed.
2. swap: `switchyard bench --during-swap mini-OLD miniature:NEW --name mini-NEW` (a steady
   load on `default` through the swap), NEW's weights already staged.

Reported: the clients' unavailability window, its ratio to the cold start, and the issue's
target (unavailability under cold start + 2 s). Results go to benchmarks/results/swap_time.json
and between the markers in BENCHMARKS.md.

    .venv/bin/python benchmarks/swap_time.py          # ~6-10 min on 2 cores

Not a test: nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from comparison_report import load_average, machine
from comparison_systems import free_port

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = REPO_ROOT / "benchmarks"
SWITCHYARD = str(Path(sys.executable).with_name("switchyard"))
BEGIN_MARK = "<!-- swap_time:begin -->"
END_MARK = "<!-- swap_time:end -->"
TARGET_MARGIN_S = 2.0
POLL_S = 0.2


def _env(state: Path) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["SWITCHYARD_HOME"] = str(state)
    env["HF_HUB_OFFLINE"] = "1"
    env.pop("RAY_ADDRESS", None)
    return env


def _cli(
    state: Path, *args: str, timeout_s: float = 1800, state_flag: bool = True
) -> subprocess.CompletedProcess[str]:
    """`switchyard ARGS` on this run's stack (bench finds it through $SWITCHYARD_HOME)."""
    print(f"$ switchyard {' '.join(args)}", flush=True)
    command = [SWITCHYARD, *args, *(["--state-dir", str(state)] if state_flag else [])]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout_s, env=_env(state), check=False
    )
    if result.returncode != 0:
        print(result.stdout[-3000:], result.stderr[-3000:], sep="\n", flush=True)
    return result


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
        "probe_attempts": probe.attempts,
    }


def swap_window(state: Path, base_url: str, args: argparse.Namespace) -> dict[str, Any]:
    out = args.workdir / "swap.json"
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
        "--during-swap", f"mini-{args.old}", f"miniature:{args.new}",
        "--name", f"mini-{args.new}",
        "--json", str(out),
        state_flag=False,
    )  # fmt: skip
    print(result.stdout, flush=True)
    document: dict[str, Any] = json.loads(out.read_text())
    document["exit_code"] = result.returncode
    return document


def markdown(document: dict[str, Any]) -> str:
    m, cold, swap = document["machine"], document["cold"], document["swap"]
    window = swap["window"]
    unavailable = window["unavailability_s"]
    operation = swap["swap"] or {"outcome": "manager died", "phase_seconds": {}}
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in operation["phase_seconds"].items())
    cold_phases = ", ".join(f"{k} {v:.1f} s" for k, v in cold["phase_seconds"].items())
    target = cold["cold_start_s"] + TARGET_MARGIN_S
    met = unavailable is not None and unavailable <= target
    lines = [
        f"Run {document['date']} on {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; "
        f"load average {document['load_before']} before, {document['load_after']} after.",
        "",
        f"Command: `{document['command']}`",
        "",
        f"OLD `mini-{document['config']['old']}` serving `default`; NEW "
        f"`miniature:{document['config']['new']}` (weights staged before both measurements); "
        f"steady load of {document['config']['concurrency']} streaming clients, "
        f"{document['config']['input_len']} in / {document['config']['output_len']} out "
        "tokens, during the swap only.",
        "",
        "| measurement | seconds |",
        "|---|---:|",
        f"| NEW cold start (add beside OLD: operation start -> first successful request) "
        f"| {cold['cold_start_s']:.1f} |",
        f"| NEW cold start including the CLI's start-up | {cold['cold_start_with_cli_s']:.1f} |",
        f"| swap unavailability seen by clients (first held send -> NEW's first token) "
        f"| {_s(unavailable)} |",
        f"| longest held request (its TTFT) | {_s(window['longest_held_s'])} |",
        f"| server-side hold (draining start -> switching end) | {_s(window['server_hold_s'])} |",
        f"| longest gap between completions | {_s(_seconds(window['longest_completion_gap']))} |",
        "",
        f"Ratio unavailability / cold start: **{_ratio(unavailable, cold['cold_start_s'])}**. "
        f"Target (unavailability under cold start + {TARGET_MARGIN_S:.0f} s = {target:.1f} s): "
        f"**{'met' if met else 'missed'}**. Requests during the swap: {window['succeeded']} ok, "
        f"{window['failed']} failed, {window['held_requests']} held, answered by "
        f"{window['answered_by']}.",
        "",
        f"Swap outcome: {operation['outcome']}; phases: {phases}. Cold add phases: {cold_phases}.",
    ]
    return "\n".join(lines)


def _seconds(gap: dict[str, float] | None) -> float | None:
    return None if gap is None else gap["seconds"]


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _ratio(value: float | None, reference: float) -> str:
    return "-" if value is None or reference <= 0 else f"{value / reference:.2f}x"


def write_markdown(path: Path, body: str) -> None:
    block = f"{BEGIN_MARK}\n{body}\n{END_MARK}"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if BEGIN_MARK in text and END_MARK in text:
        before, rest = text.split(BEGIN_MARK, 1)
        _, after = rest.split(END_MARK, 1)
        text = before + block + after
    else:
        text += f"\n{block}\n"
    path.write_text(text)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default="kimi-k2.5", help="OLD's miniature (serves first)")
    parser.add_argument("--new", default="minimax-m2.5", help="NEW's miniature")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--input-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=16)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/switchyard-swap-time"))
    parser.add_argument("--results", type=Path, default=BENCH_DIR / "results")
    parser.add_argument("--markdown", type=Path, default=REPO_ROOT / "BENCHMARKS.md")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from cluster.miniature import ensure_miniature
    from cluster.staging.layout import CacheLayout

    args.workdir.mkdir(parents=True, exist_ok=True)
    state = args.workdir / "state"
    # Staged where `up`/`add`/`swap` look, so neither measurement generates weights.
    for name in (args.old, args.new):
        ensure_miniature(name, CacheLayout(state / "cache").miniatures_dir)
    port, ray_port, dashboard_port = free_port(), free_port(), free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    document: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(
            ["python", "benchmarks/swap_time.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        "machine": machine(),
        "load_before": load_average(),
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
        removed = _cli(state, "remove", cold_name)
        if removed.returncode != 0:
            raise RuntimeError(f"remove {cold_name} failed")
        document["swap"] = swap_window(state, base_url, args)
    finally:
        _cli(state, "down", timeout_s=600)
    document["load_after"] = load_average()
    window = document["swap"]["window"]
    cold = document["cold"]["cold_start_s"]
    unavailable = window["unavailability_s"]
    document["ratio"] = None if unavailable is None else unavailable / cold
    document["target_s"] = cold + TARGET_MARGIN_S
    document["target_met"] = unavailable is not None and unavailable <= cold + TARGET_MARGIN_S
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "swap_time.json").write_text(json.dumps(document, indent=2) + "\n")
    write_markdown(args.markdown, markdown(document))
    print(
        f"cold start {cold:.1f} s, swap unavailability {_s(unavailable)} s, "
        f"ratio {_ratio(unavailable, cold)}, target met: {document['target_met']}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
