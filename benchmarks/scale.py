"""What Switchyard costs as the fleet grows: one stack of fake engines, grown model by model.

One stack (`switchyard up --fake-engines --gcs-store local`: a head running the control
plane and a data node, two raylets) declared with enough stand-in slots and CPUs for the
largest fleet, with 1,000 tenant keys and an operator key. The fleet grows through
`--sizes` (models of `miniature:llama`, each one fake engine replica); at each size:

- each `add`'s control-plane time: the operation's time less its engine's start-up steps
  (the replica process, the engine, warm-up: `cluster/fleet/startup_steps.py`);
- the wall time of `status` (through the gateway's route), `status --json`, `status --via
  ray --json` (a Ray driver, the inventory probed now), `export`, `diff -f` and `apply -f`
  of the exported, unchanged fleet, each a fresh process as a user runs it;
- the gateway's added latency: rounds alternating between the gateway and the first model's
  engine port (its direct HTTP port, the registry's token), sequential one-token
  completions; the added p50 / p99 are the gateway's less the engine's, the median over the
  rounds; and the gateway replicas' CPU per request;
- memory (RSS) and idle CPU of the manager, the registry and Serve's controller;
- the series the metrics agents export in all, and per model and per tenant;
- `park` and `wake` of one model, an `alias` change, and the manager's reconcile after its
  process is killed (until it answers `ping` again).

At the largest size the gateway is measured again with 1,000 aliases (an `apply` of the
exported fleet with them). Limits beyond this machine are fitted from the points (a line
through each resource against models) and named. Results go to
benchmarks/results/scale.json, a plot beside it, and the suite's block in BENCHMARKS.md.

    .venv/bin/python -m benchmarks run scale                  # ~30 min on 2 cores
    .venv/bin/python -m benchmarks run scale --sizes 1,4      # a quick look

Not a test: nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from benchmarks.comparison_systems import free_port
from benchmarks.cpu_accounting import cpu_seconds, process_tree, ray_session_scope, role_of
from benchmarks.records import load_average, run_record, write_block
from benchmarks.registry_probe import engine_endpoint
from benchmarks.stack_cli import switchyard_cli
from benchmarks.suites import BENCHMARKS_MD, REPO_ROOT, RESULTS, suite_of

SUITE = suite_of(__name__)
ADMIN_ENV = "SWITCHYARD_SCALE_ADMIN_KEY"
ADMIN_KEY = "sy-scale-operator"
ENGINE_STEPS = ("replica_process", "engine_start", "weight_load", "kv_cache", "compile", "warm_up")
"""The start-up steps that are the engine's own; the rest of an operation is the control
plane's (admission, staging checks, Serve's scheduling and health checks, the registry)."""
ROLES = {
    "manager": "ray::ManagerService",
    "registry": "ray::FleetRegistry",
    "serve controller": "ray::ServeController",
}


def tenant_key(i: int) -> str:
    return f"sk-scale-{i:04d}"


def keys_yaml(tenants: int) -> str:
    lines = ["keys:"]
    for i in range(tenants):
        digest = hashlib.sha256(tenant_key(i).encode()).hexdigest()
        lines.append(f"  - {{name: t-{i:04d}, key_sha256: {digest}}}")
    return "\n".join(lines) + "\n"


def name_of(i: int) -> str:
    return f"m-{i:03d}"


# ---------------------------------------------------------------- one measurement each


def timed_cli(state: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.monotonic()
    result = switchyard_cli(state, *args, timeout_s=600)
    return time.monotonic() - started, result


def operation_row(result: subprocess.CompletedProcess[str], wall_s: float) -> dict[str, Any]:
    """An operation's wall time, its own time and the control plane's share of it."""
    try:
        outcome = json.loads(result.stdout)
    except json.JSONDecodeError:
        return {
            "wall_s": round(wall_s, 2),
            "outcome": "unreadable",
            "rc": result.returncode,
            "stdout_head": result.stdout[:300],
        }
    op_s = sum((outcome.get("phase_seconds") or {}).values())
    steps = (outcome.get("details") or {}).get("startup_steps") or {}
    engine_s = sum(float(steps.get(step) or 0.0) for step in ENGINE_STEPS)
    return {
        "wall_s": round(wall_s, 2),
        "outcome": outcome.get("outcome"),
        "op_s": round(op_s, 3),
        "engine_s": round(engine_s, 3),
        "control_plane_s": round(op_s - engine_s, 3),
    }


def command_times(state: Path, workdir: Path, repeats: int) -> dict[str, float | None]:
    """Median wall time of each read command, fresh processes."""
    exported = workdir / "exported.yaml"

    def median_of(*args: str, times: int = repeats) -> float | None:
        walls = []
        for _ in range(times):
            wall, result = timed_cli(state, *args)
            if result.returncode != 0:
                return None
            walls.append(wall)
        return round(statistics.median(walls), 3)

    times: dict[str, float | None] = {
        "status": median_of("status"),
        "status --json": median_of("status", "--json"),
        "status --via ray --json": median_of("status", "--json", "--via", "ray", times=1),
    }
    wall, result = timed_cli(state, "export")
    times["export"] = round(wall, 3) if result.returncode == 0 else None
    if result.returncode == 0:
        exported.write_text(result.stdout)
        times["diff -f (unchanged)"] = median_of("diff", "-f", str(exported), times=1)
        times["apply -f (unchanged)"] = median_of("apply", "-f", str(exported), times=1)
    return times


def gateway_rounds(
    base_url: str,
    engine: tuple[str, str],
    model: str,
    args: argparse.Namespace,
    scope: Any,
    rounds_wanted: int | None = None,
) -> dict[str, Any]:
    """Rounds alternating gateway and engine, sequential one-token completions; the
    gateway's added p50/p99 per round (its less the engine's), their medians, and the
    gateway replicas' CPU per request."""
    body = {"model": model, "prompt": "scale", "max_tokens": 1}
    paths = {
        "gateway": (f"{base_url}/completions", {"Authorization": f"Bearer {tenant_key(0)}"}),
        "engine": (
            f"{engine[0].rstrip('/')}/v1/completions",
            {"Authorization": f"Bearer {engine[1]}"},
        ),
    }
    rounds: list[dict[str, Any]] = []
    gateway_cpu_s, gateway_requests, failed = 0.0, 0, 0
    with httpx.Client(timeout=60.0) as client:
        for url, headers in paths.values():  # warm both paths' connections
            for _ in range(5):
                client.post(url, json=body, headers=headers)
        for _ in range(rounds_wanted or args.rounds):
            row: dict[str, Any] = {}
            for path, (url, headers) in paths.items():
                before = cpu_seconds(scope) if path == "gateway" else {}
                latencies = []
                for _ in range(args.requests_per_round):
                    started = time.perf_counter()
                    reply = client.post(url, json=body, headers=headers)
                    latencies.append(time.perf_counter() - started)
                    failed += reply.status_code != 200
                if path == "gateway":
                    after = cpu_seconds(scope)
                    gateway_cpu_s += gateway_cpu(before, after)
                    gateway_requests += len(latencies)
                row[path] = percentiles_ms(latencies)
            row["added_p50_ms"] = round(row["gateway"]["p50"] - row["engine"]["p50"], 3)
            row["added_p99_ms"] = round(row["gateway"]["p99"] - row["engine"]["p99"], 3)
            rounds.append(row)
    return {
        "rounds": rounds,
        "added_p50_ms": round(statistics.median(r["added_p50_ms"] for r in rounds), 3),
        "added_p99_ms": round(statistics.median(r["added_p99_ms"] for r in rounds), 3),
        "engine_p50_ms": round(statistics.median(r["engine"]["p50"] for r in rounds), 3),
        "gateway_cpu_ms_per_request": round(1000 * gateway_cpu_s / max(1, gateway_requests), 3),
        "failed": failed,
    }


def percentiles_ms(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {"p50": round(1000 * statistics.median(ordered), 3), "p99": round(1000 * p99, 3)}


def gateway_cpu(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> float:
    """CPU seconds of the gateway replicas between two snapshots."""
    return sum(
        seconds - before.get(pid, (role, seconds))[1]
        for pid, (role, seconds) in after.items()
        if "gateway" in role.lower()
    )


def processes_of(scope: Any) -> dict[str, list[psutil.Process]]:
    found: dict[str, list[psutil.Process]] = {role: [] for role in ROLES}
    for proc in process_tree(scope()).values():
        title = role_of(proc)
        for role, prefix in ROLES.items():
            if title.startswith(prefix):
                found[role].append(proc)
    return found


def footprint(scope: Any, idle_s: float) -> dict[str, dict[str, float]]:
    """RSS (MiB) and idle CPU (cores) of the control plane's processes over `idle_s`."""
    procs = processes_of(scope)

    def cpu() -> dict[str, float]:
        total: dict[str, float] = {}
        for role, members in procs.items():
            seconds = 0.0
            for proc in members:
                with contextlib.suppress(psutil.Error):
                    times = proc.cpu_times()
                    seconds += times.user + times.system
            total[role] = seconds
        return total

    before = cpu()
    time.sleep(idle_s)
    after = cpu()
    out: dict[str, dict[str, float]] = {}
    for role, members in procs.items():
        rss = 0
        for proc in members:
            with contextlib.suppress(psutil.Error):
                rss += proc.memory_info().rss
        out[role] = {
            "rss_mib": round(rss / 2**20, 1),
            "idle_cpu_cores": round((after[role] - before[role]) / idle_s, 4),
        }
    return out


def series_counts(state: Path, model: str, tenant: str) -> dict[str, int]:
    """Series the metrics agents export now: in all, naming `model`, naming `tenant`."""
    from cluster.telemetry.metrics_targets import scrape_targets, service_discovery_file

    total = with_model = with_tenant = 0
    for target in scrape_targets(service_discovery_file(state)):
        try:
            text = httpx.get(f"http://{target}/metrics", timeout=10.0).text
        except httpx.HTTPError:
            continue
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            total += 1
            with_model += f'"{model}"' in line
            with_tenant += f'key="{tenant}"' in line
    return {"total": total, "one_model": with_model, "one_tenant": with_tenant}


def reconcile_s(state: Path, scope: Any, timeout_s: float = 300.0) -> float | None:
    """Kill the manager's process; seconds until the restarted manager answers `ping`
    (reconciled: the fleet it found matches its journal)."""
    managers = processes_of(scope)["manager"]
    if not managers:
        return None
    manager = managers[0]
    address = json.loads((state / "local_head.json").read_text())["address"]
    started = time.monotonic()
    os.kill(manager.pid, signal.SIGKILL)
    probe = subprocess.run(
        [sys.executable, "-m", "benchmarks.registry_probe", address, "--manager-ready",
         str(timeout_s)],
        capture_output=True, text=True, check=False, cwd=REPO_ROOT, timeout=timeout_s + 60,
    )  # fmt: skip
    if probe.returncode != 0:
        print(probe.stderr[-2000:], flush=True)
        return None
    return round(time.monotonic() - started, 2)


# ---------------------------------------------------------------- by description


def described_cluster(nodes: int) -> str:
    return "accelerator: gpu\nnodes:\n" + "".join(
        f"  - {{name: node-{i:04d}, gpu_model: h100, gpu_count: 8}}\n" for i in range(nodes)
    )


def described_fleet(models: int, sources: list[Path]) -> str:
    """`models` entries alternating over the reference configs (Kimi-K2.5, MiniMax-M2.5)."""
    lines = ["models:"]
    for i in range(models):
        lines += [
            f"  - name: model-{i:03d}",
            f"    source: {sources[i % len(sources)]}",
            "    engine: {trust_remote_code: true}",
        ]
    return "\n".join(lines) + "\n"


def by_description(workdir: Path, nodes: list[int], fleets: list[int]) -> list[dict[str, Any]]:
    """`diff --from EMPTY -f FLEET --inventory CLUSTER --json` on described clusters of
    8-GPU H100 nodes: wall time (a fresh process), steps admitted, JSON size."""
    from cluster.miniature_generator.reference import (
        KIMI_K25_CONFIG,
        MINIMAX_M25_CONFIG,
        load_reference_config,
    )

    here = workdir / "described"
    sources = []
    for filename in (KIMI_K25_CONFIG, MINIMAX_M25_CONFIG):
        source = here / "sources" / filename.removesuffix(".config.json")
        source.mkdir(parents=True, exist_ok=True)
        (source / "config.json").write_text(json.dumps(load_reference_config(filename)))
        sources.append(source)
    empty = here / "empty.yaml"
    empty.write_text("models: []\n")
    rows = []
    for node_count in nodes:
        cluster = here / f"cluster-{node_count}.yaml"
        cluster.write_text(described_cluster(node_count))
        for model_count in fleets:
            fleet = here / f"fleet-{model_count}.yaml"
            fleet.write_text(described_fleet(model_count, sources))
            started = time.monotonic()
            result = switchyard_cli(
                here, "diff", "--from", str(empty), "-f", str(fleet), "--inventory",
                str(cluster), "--json", state_flag=False, timeout_s=1800,
            )  # fmt: skip
            wall = time.monotonic() - started
            row: dict[str, Any] = {"nodes": node_count, "models": model_count}
            try:
                plan = json.loads(result.stdout)
            except json.JSONDecodeError:
                rows.append({**row, "error": result.stderr[-300:]})
                continue
            rows.append(
                {
                    **row,
                    "wall_s": round(wall, 2),
                    "admitted_steps": sum(1 for c in plan["changes"] if c["admitted"]),
                    "json_bytes": len(result.stdout),
                    "json_bytes_per_model": round(len(result.stdout) / model_count),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


# ---------------------------------------------------------------- the run


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=SUITE.command, description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,4,8,16,32,48", help="fleet sizes, ascending")
    parser.add_argument("--aliases", type=int, default=1000)
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests-per-round", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each read command")
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--described-nodes", default="8,64,512")
    parser.add_argument("--described-models", default="8,64,256")
    parser.add_argument(
        "--parts", default="described,stack", help="which parts to run: described, stack"
    )
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/switchyard-scale"))
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--markdown", type=Path, default=BENCHMARKS_MD)
    return parser.parse_args(argv)


def measure_size(
    state: Path, workdir: Path, base_url: str, engine: tuple[str, str], args: argparse.Namespace
) -> dict[str, Any]:
    scope = ray_session_scope(state)
    row: dict[str, Any] = {"commands_s": command_times(state, workdir, args.repeats)}
    row["gateway"] = gateway_rounds(base_url, engine, name_of(0), args, scope)
    row["footprint"] = footprint(scope, args.idle_s)
    row["series"] = series_counts(state, name_of(0), "t-0000")
    for kind in ("park", "wake"):
        wall, result = timed_cli(state, kind, name_of(0), "--json")
        row[kind] = operation_row(result, wall)
    wall, result = timed_cli(state, "alias", "set", "scale-probe", name_of(0), "--json")
    row["alias"] = operation_row(result, wall)
    row["reconcile_s"] = reconcile_s(state, scope)
    return row


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    args.workdir.mkdir(parents=True, exist_ok=True)
    state = args.workdir / "state"
    keys = args.workdir / "keys.yaml"
    keys.write_text(keys_yaml(args.tenants))
    os.environ[ADMIN_ENV] = ADMIN_KEY  # `status` children read the operator key here
    # Ray's metrics export every 2 s, not 10: the series counts see this size's traffic.
    os.environ["RAY_metrics_report_interval_ms"] = "2000"  # noqa: SIM112 (Ray's spelling)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    document: dict[str, Any] = {
        **run_record(SUITE, argv),
        "config": {
            "sizes": sizes,
            "aliases": args.aliases,
            "tenants": args.tenants,
            "rounds": args.rounds,
            "requests_per_round": args.requests_per_round,
            "repeats": args.repeats,
            "idle_s": args.idle_s,
        },
        "sizes": [],
        "adds": [],
    }
    parts = set(args.parts.split(","))
    if "described" in parts:
        document["described"] = by_description(
            args.workdir,
            [int(n) for n in args.described_nodes.split(",")],
            [int(m) for m in args.described_models.split(",")],
        )
    if "stack" in parts:
        grow_stack(document, sizes, state, keys, port, base_url, args)
    document["load_after"] = load_average()
    document["fits"] = fitted_limits(document)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / SUITE.result.name).write_text(json.dumps(document, indent=2) + "\n")
    if document["sizes"]:
        plot(document, args.results / "scale.png")
    write_block(args.markdown, SUITE, markdown(document))
    print(markdown(document), flush=True)
    return 0


def grow_stack(
    document: dict[str, Any],
    sizes: list[int],
    state: Path,
    keys: Path,
    port: int,
    base_url: str,
    args: argparse.Namespace,
) -> None:
    """The stack part: grow one stack through `sizes`, measuring at each."""
    slots = max(sizes) + 1
    up = switchyard_cli(
        state, "up", "--detach", "--fake-engines", "--gcs-store", "local",
        "--model", "miniature:llama", "--name", name_of(0),
        # Each fake engine replica holds two CPUs; Serve's actors and the gateways a few.
        "--standin-slots", str(slots), "--num-cpus", str(2 * slots + 8),
        "--keys", str(keys), "--admin-key-env", ADMIN_ENV,
        "--port", str(port), "--ray-port", str(free_port()),
        "--dashboard-port", str(free_port()),
    )  # fmt: skip
    try:
        if up.returncode != 0:
            raise RuntimeError("switchyard up failed")
        address = json.loads((state / "local_head.json").read_text())["address"]
        models = 1
        for size in sizes:
            while models < size:
                wall, result = timed_cli(
                    state, "add", "miniature:llama", "--name", name_of(models), "--json"
                )
                document["adds"].append({"models_before": models, **operation_row(result, wall)})
                if result.returncode != 0:
                    # The first limit this stack met: what refused the next model.
                    document["limit"] = {"models": models, "message": failure_of(result)}
                    break
                models += 1
            if models < size:
                break
            engine = engine_endpoint(address, f"model-{name_of(0)}-")
            print(f"measuring {size} models", flush=True)
            row = {"models": size, "aliases": 1, **measure_size(state, args.workdir, base_url,
                                                                engine, args)}  # fmt: skip
            document["sizes"].append(row)
            print(json.dumps(row)[:2000], flush=True)
        if args.aliases:
            with_aliases = aliased_fleet(args.workdir / "exported.yaml", args.aliases)
            wall, result = timed_cli(state, "apply", "-f", str(with_aliases), "--json")
            document["apply_aliases_s"] = round(wall, 2) if result.returncode == 0 else None
            engine = engine_endpoint(address, f"model-{name_of(0)}-")
            scope = ray_session_scope(state)
            document["with_aliases"] = {
                "models": models,
                "aliases": args.aliases + 1,
                "commands_s": command_times(state, args.workdir, args.repeats),
                "gateway": gateway_rounds(base_url, engine, name_of(0), args, scope),
                "footprint": footprint(scope, args.idle_s),
            }
        try:
            document["side_by_side"] = one_model_beside(
                args, keys, (base_url, engine_endpoint(address, f"model-{name_of(0)}-"), state)
            )
        except (RuntimeError, OSError, httpx.HTTPError, subprocess.SubprocessError) as exc:
            document["side_by_side"] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
    finally:
        switchyard_cli(state, "down", timeout_s=600)


def one_model_beside(
    args: argparse.Namespace,
    keys: Path,
    grown: tuple[str, tuple[str, str], Path],
) -> dict[str, Any]:
    """The gateway's added p50 at one model against the grown fleet's, side by side: a
    second stack (same flags, one model) started beside the grown one, rounds alternating
    between the two (each round: its gateway, then its engine), so both see the same
    machine and its load; the ratio per round and its median."""
    state = args.workdir / "one-model"
    port = free_port()
    up = switchyard_cli(
        state, "up", "--detach", "--fake-engines", "--gcs-store", "local",
        "--model", "miniature:llama", "--name", name_of(0), "--keys", str(keys),
        "--port", str(port), "--ray-port", str(free_port()),
        "--dashboard-port", str(free_port()),
    )  # fmt: skip
    try:
        if up.returncode != 0:
            return {"error": "the one-model stack did not start"}
        address = json.loads((state / "local_head.json").read_text())["address"]
        systems = {
            "one model": (
                f"http://127.0.0.1:{port}/v1",
                engine_endpoint(address, f"model-{name_of(0)}-"),
                ray_session_scope(state),
            ),
            "grown": (grown[0], grown[1], ray_session_scope(grown[2])),
        }
        rows = []
        for index in range(args.rounds):
            order = list(systems) if index % 2 == 0 else list(reversed(systems))
            row: dict[str, float] = {}
            for label in order:
                url, engine, scope = systems[label]
                measured = gateway_rounds(url, engine, name_of(0), args, scope, rounds_wanted=1)
                row[label] = measured["added_p50_ms"]
            row["ratio"] = round(row["grown"] / row["one model"], 3) if row["one model"] else 0.0
            rows.append(row)
        return {
            "rounds": rows,
            "one_model_added_p50_ms": round(statistics.median(r["one model"] for r in rows), 3),
            "grown_added_p50_ms": round(statistics.median(r["grown"] for r in rows), 3),
            "ratio_median": round(statistics.median(r["ratio"] for r in rows), 3),
        }
    finally:
        switchyard_cli(state, "down", timeout_s=600)


def failure_of(result: subprocess.CompletedProcess[str]) -> str:
    """The operation's own message, else the command's last words."""
    try:
        return str(json.loads(result.stdout)["message"])[:400]
    except (json.JSONDecodeError, KeyError, TypeError):
        return (result.stderr or result.stdout)[-400:]


def aliased_fleet(exported: Path, aliases: int) -> Path:
    """The exported fleet with `aliases` more aliases, spread over its models in turn."""
    import yaml

    fleet = yaml.safe_load(exported.read_text())
    models = fleet["models"]
    for i in range(aliases):
        entry = models[i % len(models)]
        entry.setdefault("aliases", []).append(f"a-{i:04d}")
    path = exported.with_name("with_aliases.yaml")
    path.write_text(yaml.safe_dump(fleet, sort_keys=False))
    return path


# ---------------------------------------------------------------- limits and the record


def line_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares: (intercept, slope)."""
    if len(xs) < 2:
        return (ys[0] if ys else 0.0, 0.0)
    slope, intercept = statistics.linear_regression(xs, ys)
    return intercept, slope


PROCESS_CORES = 1.0
"""What one control-plane process can use: each is one Python process, its work under one
interpreter lock, so its idle CPU meets a limit at one core whatever the machine has."""


def fitted_limits(document: dict[str, Any]) -> dict[str, Any]:
    """Per resource: a line through the points against models, and the fleet at which it
    reaches its capacity (one core per process; the machine's memory)."""
    rows = document["sizes"]
    if not rows:
        return {}
    xs = [float(r["models"]) for r in rows]
    memory_mib = float(document["machine"]["memory_gib"]) * 1024
    fits: dict[str, Any] = {}
    for role in ROLES:
        for key, capacity in (("idle_cpu_cores", PROCESS_CORES), ("rss_mib", memory_mib)):
            ys = [float(r["footprint"][role][key]) for r in rows]
            intercept, slope = line_fit(xs, ys)
            limit = None if slope <= 0 else int((capacity - intercept) / slope)
            fits[f"{role} {key}"] = {
                "intercept": round(intercept, 4),
                "per_model": round(slope, 5),
                "models_at_capacity": limit,
            }
    adds = [a for a in document["adds"] if "control_plane_s" in a]
    if adds:
        intercept, slope = line_fit(
            [float(a["models_before"]) for a in adds],
            [float(a["control_plane_s"]) for a in adds],
        )
        fits["add control_plane_s"] = {
            "intercept": round(intercept, 3),
            "per_model": round(slope, 5),
        }
    return fits


def plot(document: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = document["sizes"]
    xs = [r["models"] for r in rows]
    figure, axes = plt.subplots(2, 2, figsize=(11, 8))
    commands = axes[0][0]
    for name in rows[0]["commands_s"]:
        ys = [r["commands_s"].get(name) for r in rows]
        commands.plot(xs, [y if y is not None else float("nan") for y in ys], "o-", label=name)
    commands.set(title="command wall time", xlabel="models", ylabel="seconds")
    commands.legend(fontsize=7)
    gateway = axes[0][1]
    gateway.plot(xs, [r["gateway"]["added_p50_ms"] for r in rows], "o-", label="added p50")
    gateway.plot(xs, [r["gateway"]["added_p99_ms"] for r in rows], "o-", label="added p99")
    gateway.set(title="gateway added latency", xlabel="models", ylabel="ms")
    gateway.legend(fontsize=7)
    memory = axes[1][0]
    cpu = axes[1][1]
    for role in ROLES:
        memory.plot(xs, [r["footprint"][role]["rss_mib"] for r in rows], "o-", label=role)
        cpu.plot(xs, [r["footprint"][role]["idle_cpu_cores"] for r in rows], "o-", label=role)
    memory.set(title="RSS", xlabel="models", ylabel="MiB")
    cpu.set(title="idle CPU", xlabel="models", ylabel="cores")
    memory.legend(fontsize=7)
    cpu.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=90)


def markdown(document: dict[str, Any]) -> str:
    m, config, rows = document["machine"], document["config"], document["sizes"]
    lines = [
        f"Run {document['date']} on {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; "
        f"load average {document['load_before']} before, {document['load_after']} after.",
        "",
        f"Command: `{document['command']}`",
        "",
        "One stack of fake engines (`up --fake-engines --gcs-store local`: a head and a data "
        f"node), {config['tenants']} tenant keys, grown to each fleet size by `add`. Commands "
        f"are fresh processes (median of {config['repeats']}); the gateway's added latency is "
        "its p50/p99 less the first model's engine port's, sequential one-token completions, "
        f"the median of {config['rounds']} rounds alternating the two "
        f"({config['requests_per_round']} requests each).",
        "",
        "![scale](benchmarks/results/scale.png)",
        "",
    ]
    described = document.get("described") or []
    if described:
        lines += [
            "`diff --from EMPTY -f FLEET --inventory CLUSTER --json` on described clusters of "
            "8-GPU H100 nodes, the fleet alternating Kimi-K2.5 and MiniMax-M2.5 (their real "
            "configs): wall time of the process, steps admitted, JSON size.",
            "",
            "| nodes | models | wall (s) | admitted | JSON (KiB) | JSON per model (bytes) |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for d in described:
            if "error" in d:
                lines.append(f"| {d['nodes']} | {d['models']} | failed | | | |")
                continue
            lines.append(
                f"| {d['nodes']} | {d['models']} | {d['wall_s']:.2f} | {d['admitted_steps']} "
                f"| {d['json_bytes'] / 1024:.0f} | {d['json_bytes_per_model']} |"
            )
        lines.append("")
    names = list(rows[0]["commands_s"]) if rows else []
    lines += [
        "| models | " + " | ".join(f"`{n}` (s)" for n in names) + " |",
        "|---:|" + "---:|" * len(names),
    ]
    for r in rows:
        cells = [
            ("-" if r["commands_s"].get(n) is None else f"{r['commands_s'][n]:.2f}") for n in names
        ]
        lines.append(f"| {r['models']} | " + " | ".join(cells) + " |")
    extra = document.get("with_aliases")
    if extra:
        cells = [
            ("-" if extra["commands_s"].get(n) is None else f"{extra['commands_s'][n]:.2f}")
            for n in names
        ]
        lines.append(
            f"| {extra['models']} + {extra['aliases']} aliases | " + " | ".join(cells) + " |"
        )
    lines += [
        "",
        "| models | gateway added p50 / p99 (ms) | engine p50 (ms) | gateway CPU / request (ms) "
        "| manager / registry / controller RSS (MiB) | idle CPU (cores) | series: all / per "
        "model / per tenant | park / wake / alias control plane (s) | reconcile (s) |",
        "|---:|---:|---:|---:|---|---|---|---|---:|",
    ]
    all_rows = [*rows, *([extra] if extra else [])]
    for r in all_rows:
        g, f = r["gateway"], r["footprint"]
        label = f"{r['models']}" + (f" + {r['aliases']} aliases" if r.get("aliases", 1) > 1 else "")
        series = r.get("series")
        ops = [r.get(k) for k in ("park", "wake", "alias")]
        lines.append(
            f"| {label} | {g['added_p50_ms']:.2f} / {g['added_p99_ms']:.2f} "
            f"| {g['engine_p50_ms']:.2f} | {g['gateway_cpu_ms_per_request']:.2f} "
            f"| {' / '.join(format(f[role]['rss_mib'], '.0f') for role in ROLES)} "
            f"| {' / '.join(format(f[role]['idle_cpu_cores'], '.3f') for role in ROLES)} "
            + (
                f"| {series['total']} / {series['one_model']} / {series['one_tenant']} "
                if series
                else "| - "
            )
            + "| "
            + " / ".join(
                "-" if o is None or "control_plane_s" not in o else f"{o['control_plane_s']:.2f}"
                for o in ops
            )
            + f" | {r.get('reconcile_s') if r.get('reconcile_s') is not None else '-'} |"
        )
    beside = document.get("side_by_side")
    if beside and "error" not in beside:
        extra_label = "" if not extra else f" and {extra['aliases']} aliases"
        lines += [
            "",
            f"Side by side: the gateway's added p50 with {rows[-1]['models']} models"
            f"{extra_label} against a second stack serving one model, started beside it "
            f"(same flags), rounds alternating between the two: "
            f"{beside['grown_added_p50_ms']:.2f} ms against "
            f"{beside['one_model_added_p50_ms']:.2f} ms, a median ratio of "
            f"**{beside['ratio_median']:.2f}** over {len(beside['rounds'])} rounds ("
            + ", ".join(f"{r['ratio']:.2f}" for r in beside["rounds"])
            + "). The per-size rows above are measured at different times, as the fleet "
            "grows: their drift is the machine's load (every fake engine replica's health "
            "checks and registrations on two cores), not the gateway's per-request work.",
        ]
    limit = document.get("limit")
    if limit:
        lines += [
            "",
            f"The first limit: the {limit['models'] + 1}th model was refused: {limit['message']}",
        ]
    adds = document["adds"]
    if adds:
        lines += [
            "",
            "Each `add`'s control-plane time (the operation less its engine's start-up steps), "
            "by the models already running: "
            + ", ".join(
                f"{a['models_before']}: {a.get('control_plane_s', '-')}"
                for a in adds[:: max(1, len(adds) // 12)]
            )
            + ".",
        ]
    fits = fitted_limits(document)
    if fits:
        lines += [
            "",
            "Fitted against models (a line through the points; a process's CPU capacity is "
            "one core, its memory the machine's):",
            "",
        ]
        for name, fit in fits.items():
            at = fit.get("models_at_capacity")
            lines.append(
                f"- {name}: {fit['intercept']} + {fit['per_model']} per model"
                + ("" if at is None else f"; at capacity at about {at} models")
            )
        limits = {
            k: v["models_at_capacity"] for k, v in fits.items() if v.get("models_at_capacity")
        }
        if limits:
            first = min(limits, key=lambda k: limits[k])
            lines += ["", f"The first limit fitted: **{first}**, at about {limits[first]} models."]
    return "\n".join(lines)
