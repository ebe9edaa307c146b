"""What a GCS lost on the head costs: a plain head against a fault-tolerant one, in one run.

For each head, one stack (`switchyard up --fake-engines`: real Ray, Serve, gateway,
registry and manager; the engines are not the subject), and the same steps:

1. steady load: `--clients` clients call `default` back to back (half of them streaming);
2. the head's `gcs_server` is SIGKILLed;
3. for `--observe-s` seconds: every request's outcome, `switchyard status`'s exit code and
   first line 5 s after the kill, and when `status` answers again.

The plain head (no `--gcs-store`) has no supervisor: its raylet gives up on the GCS after
a while and exits, and its replicas with it. The fault-tolerant heads (`--gcs-store local`,
a Redis beside the head, and `--gcs-store rocksdb:PATH`, Ray's RocksDB store) have their
GCS started again by the supervisor, against the same store. Reported per head: requests
served after the kill, the first failure after the kill and what it was, whether the
endpoint still answers at the end, and how long until `status` answers. Results go to
benchmarks/results/head_loss.json and the suite's block in BENCHMARKS.md.

    .venv/bin/python -m benchmarks run head-loss          # ~8 min on 2 cores

Not a test: nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks.comparison_systems import free_port
from benchmarks.records import load_average, run_record, write_block
from benchmarks.suites import BENCHMARKS_MD, RESULTS, suite_of

SUITE = suite_of(__name__)
SWITCHYARD = str(Path(sys.executable).with_name("switchyard"))
API_KEY = "head-loss-key"


@dataclass
class Load:
    """Clients calling `default` back to back; each outcome as (sent, ended, ok, what)."""

    base_url: str
    clients: int
    outcomes: list[tuple[float, float, bool, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _work(self, stream: bool) -> None:
        body = {"model": "default", "prompt": "hi", "max_tokens": 8, "stream": stream}
        headers = {"Authorization": f"Bearer {API_KEY}"}
        with httpx.Client(timeout=30) as client:
            while not self._stop.is_set():
                sent = time.monotonic()
                try:
                    answer = client.post(f"{self.base_url}/completions", json=body, headers=headers)
                    text = answer.text
                    ok = answer.status_code == 200 and '"error"' not in text
                    what = f"HTTP {answer.status_code}" if not ok else "ok"
                except httpx.HTTPError as exc:
                    ok, what = False, type(exc).__name__
                    time.sleep(0.2)
                with self._lock:
                    self.outcomes.append((sent, time.monotonic(), ok, what))

    def __enter__(self) -> Load:
        self._threads = [
            threading.Thread(target=self._work, args=(i % 2 == 0,), daemon=True)
            for i in range(self.clients)
        ]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)


def _cli(state: Path, *args: str, timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SWITCHYARD_API_KEY=API_KEY)
    env.pop("RAY_ADDRESS", None)
    return subprocess.run(
        [SWITCHYARD, *args, "--state-dir", str(state)],
        capture_output=True, text=True, timeout=timeout_s, env=env, check=False,
    )  # fmt: skip


def _gcs_pid(state: Path) -> int:
    from cluster.startup.ray_runtime import local_head_processes

    for proc in local_head_processes(state):
        if proc.name() == "gcs_server":
            return proc.pid
    raise RuntimeError("no gcs_server found for the head")


def one_head(
    workdir: Path, label: str, extra: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    state = workdir / label.replace(" ", "").replace(",", "-")
    port, ray_port, dashboard_port = free_port(), free_port(), free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    up = _cli(
        state, "up", "--detach", "--fake-engines", "--port", str(port),
        "--ray-port", str(ray_port), "--dashboard-port", str(dashboard_port), *extra,
    )  # fmt: skip
    if up.returncode != 0:
        raise RuntimeError(f"{label}: up failed: {up.stderr[-2000:]}")
    result: dict[str, Any] = {"up_args": extra}
    try:
        with Load(base_url, args.clients) as load:
            time.sleep(5)
            killed_at = time.monotonic()
            os.kill(_gcs_pid(state), 9)
            time.sleep(5)
            status = _cli(state, "status", timeout_s=120)
            result["status_5s_after"] = {
                "exit_code": status.returncode,
                "says": (status.stderr.strip() or status.stdout.strip()).splitlines()[:2],
            }
            answered_at = time.monotonic() if status.returncode == 0 else None
            while time.monotonic() - killed_at < args.observe_s:
                if (
                    answered_at is None
                    and _cli(state, "status", "--json", timeout_s=60).returncode == 0
                ):
                    answered_at = time.monotonic()
                time.sleep(2)
        outcomes = sorted(load.outcomes)
        after = [o for o in outcomes if o[0] >= killed_at]
        failures = [o for o in after if not o[2]]
        tail = [o for o in after if o[0] >= killed_at + args.observe_s - 10]
        result.update(
            {
                "requests_before_kill": sum(1 for o in outcomes if o[0] < killed_at),
                "served_after_kill": sum(1 for o in after if o[2]),
                "failed_after_kill": len(failures),
                "first_failure_s": None if not failures else failures[0][0] - killed_at,
                "first_failure": None if not failures else failures[0][3],
                "last_success_s": max((o[1] - killed_at for o in after if o[2]), default=None),
                "serving_at_end": bool(tail) and all(o[2] for o in tail),
                "status_answers_again_s": None if answered_at is None else answered_at - killed_at,
            }
        )
    finally:
        _cli(state, "down", timeout_s=300)
    return result


def markdown(document: dict[str, Any]) -> str:
    def s(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f} s"

    rows = []
    for label, head in document["heads"].items():
        status = head["status_5s_after"]
        # `status` answers again: the first success after the kill, at 5 s or later.
        rows.append(
            f"| {label} | {head['served_after_kill']} | {head['failed_after_kill']}"
            + (
                f" (the first {s(head['first_failure_s'])} after the kill: {head['first_failure']})"
                if head["failed_after_kill"]
                else ""
            )
            + " "
            f"| {s(head['last_success_s'])} | {'yes' if head['serving_at_end'] else 'no'} "
            f"| exit {status['exit_code']} | {s(head['status_answers_again_s'])} |"
        )
    return "\n".join(
        [
            "## Head loss",
            "",
            f"`{document['command']}`, {document['date']}, {document['machine']['cores']} cores; "
            f"{document['config']['clients']} clients on `default` (fake engines), the head's "
            f"`gcs_server` SIGKILLed, watched {document['config']['observe_s']} s.",
            "",
            "| head | served after the kill | failed after the kill | last answer after the kill "
            "| serving at the end | `status` 5 s after | `status` answers again |",
            "|---|---|---|---|---|---|---|",
            *rows,
        ]
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=SUITE.command, description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--observe-s", type=float, default=90.0)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/switchyard-head-loss"))
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--markdown", type=Path, default=BENCHMARKS_MD)
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    document: dict[str, Any] = {
        **run_record(SUITE, argv),
        "config": {"clients": args.clients, "observe_s": args.observe_s},
        "heads": {},
    }
    heads: tuple[tuple[str, list[str]], ...] = (
        ("plain", []),
        ("fault-tolerant, local Redis", ["--gcs-store", "local"]),
        ("fault-tolerant, RocksDB", ["--gcs-store", f"rocksdb:{args.workdir / 'rocksdb'}"]),
    )
    for label, extra in heads:
        document["heads"][label] = one_head(args.workdir, label, extra, args)
        print(label, json.dumps(document["heads"][label]), flush=True)
    document["load_after"] = load_average()
    args.results.mkdir(parents=True, exist_ok=True)
    SUITE.result.write_text(json.dumps(document, indent=2) + "\n")
    write_block(args.markdown, SUITE, markdown(document))
    return 0
