"""Models on demand under alternating load: two models on one accelerator slot, parked and
woken by the fleet itself, on the real CPU stack with real vLLM.

One stack (`switchyard up -f`), its head's inventory overridden to one accelerator slot
(`gpu_count: 1`; Ray still declares four, so only admission keeps the models apart), serving
a fleet file of two miniatures, both `residency: on_demand` with `park_mode: unload`: the
first is started, the second added parked (it fits only once the first parks). Then the
clients alternate between the two models' aliases in phases: every client asks for one
alias for a phase, then all move to the other. A phase's first requests are held at the
gateway while the manager wakes their model, parking the other (the least recently used)
to make room. After the last phase no request comes, and the model left resident is parked
once idle for `park_after_idle_s`.

Reported: requests per phase (answered, failed, and answered 503 + Retry-After because the
predicted wake exceeded the hold timeout, counted apart and retried when it says), each
phase's longest wait (a request held for the wake), the manager's parks and wakes in order
from its journal (who, why, how long), and each model's wakes against its cold start (the
engine start of its first deployment). Results go to benchmarks/results/on_demand.json and
the suite's block in BENCHMARKS.md.

    .venv/bin/python -m benchmarks run on-demand      # ~12 min on 2 cores

Not a test: nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.comparison_systems import free_port
from benchmarks.records import load_average, run_record, write_block
from benchmarks.stack_cli import switchyard_cli
from benchmarks.suites import BENCHMARKS_MD, RESULTS, suite_of

SUITE = suite_of(__name__)
TOO_LONG = "longer than this gateway holds requests"
"""The gateway's 503 for a hold predicted to outlast its bound (route_resolver.py)."""


@dataclass
class Sample:
    phase: int
    alias: str
    started_s: float
    seconds: float
    status: int
    """HTTP status; 0 when the connection failed."""
    error: str | None
    too_long: bool = False
    """503 + Retry-After for a wake predicted past the hold timeout: counted apart."""


def fleet_file(models: list[str], args: argparse.Namespace) -> str:
    lines = ["models:"]
    for model in models:
        lines += [
            f"  - name: mini-{model}",
            f"    source: miniature:{model}",
            f"    aliases: [{alias_of(model)}]",
            "    residency: on_demand",
            "    park_mode: unload",
            f"    park_after_idle_s: {args.park_after_idle_s:g}",
            f"    min_resident_s: {args.min_resident_s:g}",
        ]
    return "\n".join(lines) + "\n"


def alias_of(model: str) -> str:
    return model.split("-")[0]


async def alternate(base_url: str, aliases: list[str], args: argparse.Namespace) -> list[Sample]:
    """`args.clients` clients, each asking for phase k's alias during phase k."""
    samples: list[Sample] = []
    started = time.monotonic()
    end = started + args.phase_s * args.phases

    last: int = args.phases - 1

    def phase_at(now: float) -> int:
        return min(int((now - started) // args.phase_s), last)

    async def client(client: httpx.AsyncClient) -> None:
        while (now := time.monotonic()) < end:
            phase = phase_at(now)
            alias = aliases[phase % len(aliases)]
            body = {"model": alias, "prompt": "The cluster", "max_tokens": args.max_tokens}
            error, status, retry_after = None, 0, None
            try:
                reply = await client.post(f"{base_url}/completions", json=body)
                status = reply.status_code
                if status != 200:
                    error = reply.text[:300]
                    retry_after = reply.headers.get("retry-after")
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"
            too_long = status == 503 and retry_after is not None and TOO_LONG in (error or "")
            samples.append(
                Sample(phase, alias, now - started, time.monotonic() - now, status, error, too_long)
            )
            if too_long:
                await asyncio.sleep(min(float(retry_after or 1), max(0.0, end - time.monotonic())))
            elif error is not None:
                await asyncio.sleep(1.0)

    timeout = httpx.Timeout(args.request_timeout_s)
    async with httpx.AsyncClient(timeout=timeout) as http:
        await asyncio.gather(*(client(http) for _ in range(args.clients)))
    return samples


def phase_rows(samples: list[Sample], args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for phase in range(args.phases):
        mine = [s for s in samples if s.phase == phase]
        ok = [s for s in mine if s.status == 200]
        rows.append(
            {
                "phase": phase,
                "alias": mine[0].alias if mine else None,
                "requests": len(mine),
                "ok": len(ok),
                "failed": sum(1 for s in mine if s.status != 200 and not s.too_long),
                "too_long_503": sum(1 for s in mine if s.too_long),
                "longest_wait_s": max((s.seconds for s in ok), default=None),
                "errors": sorted({(s.error or "")[:160] for s in mine if s.error})[:5],
            }
        )
    return rows


def journal_since(state: Path, since: float) -> list[dict[str, Any]]:
    """The manager's operations that began at or after `since`, each its start and end."""
    path = state / "manager" / "journal.jsonl"
    starts: dict[str, dict[str, Any]] = {}
    ops: list[dict[str, Any]] = []
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line
        if entry.get("event") == "start" and float(entry.get("at", 0)) >= since:
            starts[entry["op_id"]] = entry
        elif entry.get("event") == "details" and entry.get("op_id") in starts:
            # Decided on the way: the models a wake parks to make room.
            starts[entry["op_id"]].setdefault("details", {}).update(entry["details"])
        elif entry.get("event") == "end" and entry.get("op_id") in starts:
            start = starts.pop(entry["op_id"])
            details = start.get("details") or {}
            ops.append(
                {
                    "kind": start["kind"],
                    "model": details.get("name"),
                    "reason": details.get("park_reason"),
                    "trigger": details.get("trigger"),
                    "evicted": details.get("evicted") or [],
                    "at_s": round(float(start["at"]) - since, 1),
                    "outcome": entry.get("outcome"),
                    "seconds": round(sum((entry.get("phase_seconds") or {}).values()), 2),
                    "phase_seconds": entry.get("phase_seconds"),
                    "message": entry.get("message"),
                }
            )
    return ops


def per_model(ops: list[dict[str, Any]], models: list[str]) -> dict[str, Any]:
    """Each model's cold start (the `deploying_new` of its first start: an add, else its
    first wake) and its wakes after that."""
    out: dict[str, Any] = {}
    for model in models:
        name = f"mini-{model}"
        starts = [
            o
            for o in ops
            if o["model"] == name
            and o["kind"] in ("add", "wake")
            and o["outcome"] == "done"
            and (o["phase_seconds"] or {}).get("deploying_new")
        ]
        first = starts[0] if starts else None
        wakes = [o for o in ops if o["model"] == name and o["kind"] == "wake"]
        later = [o for o in wakes if o is not first and o["outcome"] == "done"]
        out[name] = {
            "cold_start_s": None if first is None else first["phase_seconds"]["deploying_new"],
            "cold_start_by": None if first is None else first["kind"],
            "wakes": len(wakes),
            "wakes_done": sum(1 for o in wakes if o["outcome"] == "done"),
            "wake_s": [o["seconds"] for o in later],
            "parks": {
                "evicted": sum(1 for o in ops if name in o["evicted"]),
                **{
                    reason: sum(
                        1
                        for o in ops
                        if o["model"] == name and o["kind"] == "park" and o["reason"] == reason
                    )
                    for reason in ("idle", "manual")
                },
            },
        }
    return out


def wait_all_parked(state: Path, timeout_s: float) -> float | None:
    """Seconds until `status --json` shows every model parked; None at the timeout."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        status = switchyard_cli(state, "status", "--json", timeout_s=120)
        if status.returncode == 0:
            models = json.loads(status.stdout)["models"]
            if models and all(m["state"] == "parked" for m in models):
                return time.monotonic() - started
        time.sleep(10)
    return None


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=SUITE.command, description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="kimi-k2.5,minimax-m2.5", help="two miniatures")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--phases", type=int, default=4)
    parser.add_argument("--phase-s", type=float, default=90.0)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--min-resident-s", type=float, default=30.0)
    parser.add_argument("--park-after-idle-s", type=float, default=120.0)
    parser.add_argument("--request-timeout-s", type=float, default=600.0)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/switchyard-on-demand"))
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--markdown", type=Path, default=BENCHMARKS_MD)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    from cluster.miniature_generator import ensure_miniature
    from cluster.staging.cache_layout import CacheLayout

    models = args.models.split(",")
    if len(models) != 2:
        raise SystemExit("--models: two miniatures, comma-separated")
    args.workdir.mkdir(parents=True, exist_ok=True)
    state = args.workdir / "state"
    for name in models:
        ensure_miniature(name, CacheLayout(state / "cache").miniatures_dir)
    fleet = args.workdir / "fleet.yaml"
    fleet.write_text(fleet_file(models, args))
    inventory = args.workdir / "inventory.yaml"
    inventory.write_text(f"overrides:\n  - node_name: {socket.gethostname()}\n    gpu_count: 1\n")
    port, ray_port, dashboard_port = free_port(), free_port(), free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    document: dict[str, Any] = {
        **run_record(SUITE, argv),
        "config": {
            "models": models,
            "clients": args.clients,
            "phases": args.phases,
            "phase_s": args.phase_s,
            "max_tokens": args.max_tokens,
            "min_resident_s": args.min_resident_s,
            "park_after_idle_s": args.park_after_idle_s,
            "fleet_file": fleet.read_text(),
        },
    }
    since = time.time()
    up = switchyard_cli(
        state, "up", "--detach", "-f", str(fleet), "--inventory", str(inventory),
        "--port", str(port), "--ray-port", str(ray_port),
        "--dashboard-port", str(dashboard_port),
    )  # fmt: skip
    try:
        if up.returncode != 0:
            raise RuntimeError("switchyard up failed")
        document["up_s"] = round(time.time() - since, 1)
        aliases = [alias_of(m) for m in models]
        load_started = time.time()
        samples = asyncio.run(alternate(base_url, aliases, args))
        document["load_s"] = round(time.time() - load_started, 1)
        document["phases"] = phase_rows(samples, args)
        print(json.dumps(document["phases"], indent=2), flush=True)
        idle = wait_all_parked(state, args.park_after_idle_s + 180)
        document["idle_parked_after_load_s"] = None if idle is None else round(idle, 1)
        document["operations"] = [
            {k: v for k, v in o.items() if k != "message"} | {"message": o["message"][:200]}
            for o in journal_since(state, since)
        ]
        document["samples"] = [asdict(s) for s in samples if s.status != 200]
    finally:
        switchyard_cli(state, "down", timeout_s=600)
    document["load_after"] = load_average()
    document["models"] = per_model(document.get("operations", []), models)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / SUITE.result.name).write_text(json.dumps(document, indent=2) + "\n")
    write_block(args.markdown, SUITE, markdown(document))
    print(markdown(document), flush=True)
    return 0


def markdown(document: dict[str, Any]) -> str:
    m, config = document["machine"], document["config"]
    phases = document["phases"]
    total = {k: sum(p[k] for p in phases) for k in ("requests", "ok", "failed", "too_long_503")}
    lines = [
        f"Run {document['date']} on {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; "
        f"load average {document['load_before']} before, {document['load_after']} after.",
        "",
        f"Command: `{document['command']}`",
        "",
        f"Two miniatures, `{'`, `'.join(config['models'])}`, both `residency: on_demand` "
        f"(`park_mode: unload`, `min_resident_s: {config['min_resident_s']:g}`, "
        f"`park_after_idle_s: {config['park_after_idle_s']:g}`), on a head whose inventory "
        "declares one accelerator slot (`gpu_count: 1`); the second was added parked. "
        f"{config['clients']} clients, {config['phases']} phases of {config['phase_s']:g} s, "
        f"all clients on one model's alias per phase, alternating ({config['max_tokens']} "
        "tokens per request).",
        "",
        f"Requests: **{total['ok']} answered, {total['failed']} failed**, "
        f"{total['too_long_503']} answered 503 + Retry-After (wake predicted past the hold "
        f"timeout), of {total['requests']}.",
        "",
        "| phase | alias | requests | answered | failed | 503 too long | longest wait (s) |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for p in phases:
        wait = "-" if p["longest_wait_s"] is None else f"{p['longest_wait_s']:.1f}"
        lines.append(
            f"| {p['phase']} | {p['alias']} | {p['requests']} | {p['ok']} | {p['failed']} "
            f"| {p['too_long_503']} | {wait} |"
        )
    lines += [
        "",
        "| model | cold start (s) | later wakes (s) | wakes done / asked "
        "| parked: evicted / idle / manual |",
        "|---|---:|---|---:|---|",
    ]
    for name, row in document["models"].items():
        cold = "-" if row["cold_start_s"] is None else f"{row['cold_start_s']:.1f}"
        wakes = ", ".join(f"{s:.1f}" for s in row["wake_s"]) or "-"
        parks = row["parks"]
        lines.append(
            f"| {name} | {cold} ({row['cold_start_by']}) | {wakes} "
            f"| {row['wakes_done']} / {row['wakes']} "
            f"| {parks['evicted']} / {parks['idle']} / {parks['manual']} |"
        )
    idle = document.get("idle_parked_after_load_s")
    lines += [
        "",
        "A later wake is the whole operation (admission, parking the other model, the cold "
        "start, warm-up); the cold start is the engine start of the model's first "
        "deployment. After the load, the model left resident was parked as idle "
        + ("(not within the wait)." if idle is None else f"{idle:.0f} s after the last request.")
        + " The manager's operations, in order:",
        "",
    ]
    for o in document.get("operations", []):
        why = o["reason"] or o["trigger"] or ""
        room = f", parking {', '.join(o['evicted'])} to make room" if o["evicted"] else ""
        lines.append(
            f"- {o['at_s']:.0f} s: {o['kind']} {o['model']}"
            f"{f' ({why})' if why else ''}{room}: {o['outcome']}, {o['seconds']:.1f} s"
        )
    return "\n".join(lines)
