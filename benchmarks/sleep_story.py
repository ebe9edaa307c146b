"""The story at its scale on a simulated node: two models parked by vLLM's sleep mode take
turns on one box of 8 GPUs under alternating load.

A real Ray cluster (`ray.cluster_utils.Cluster`): a head for the control plane and a node on
127.0.0.2 declaring 8 logical `GPU`s, its inventory overridden as the story's box (8 x RTX
PRO 6000, PCIe, 2 TB of host memory). `switchyard up --accelerator gpu --fake-engines` joins
it with a fleet file of the story's two models, both `residency: on_demand` and
`park_mode: sleep`: Kimi-K2.5 on all 8 GPUs and MiniMax-M2.5 as TP4 + EP with `replicas: 2`.
The engines are stand-ins that implement sleep and wake (their times, `FAKE_ENGINE`, are
printed with the story's figures they stand for); the
subjects are the GPU path of placement and admission (bundles asking for half a `GPU` each,
the GPU profile, the host-memory budget) and the manager's sleep and wake.

The Kimi miniature has 4 attention heads, so admission refuses its TP8 in vLLM's words; it
runs as TP4 x PP2, the same 8 ranks on the same 8 GPUs.

Clients alternate between the two models' aliases in phases (all on one per phase). A
phase's first requests are held while the manager puts the other model to sleep and wakes
theirs. Reported: requests per phase (answered, failed), the longest wait, the manager's
parks and wakes in order, each wake's predicted and measured time (the prediction corrected
by the model's earlier wakes, as the manager made it), where each model's ranks were placed,
and what each wake would take at the story's real weights (`policies/wake_paths.py`).

    .venv/bin/python -m benchmarks run sleep-story      # ~5 min on 2 cores

Not a test: nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.comparison_systems import free_port
from benchmarks.on_demand import alternate, journal_since, phase_rows
from benchmarks.records import load_average, run_record, write_block
from benchmarks.stack_cli import switchyard_cli
from benchmarks.suites import BENCHMARKS_MD, RESULTS, suite_of

SUITE = suite_of(__name__)
GPU_NODE_IP = "127.0.0.2"
STORY = {
    "kimi": {"source": "miniature:kimi-k2.5", "layout": "{tp: 4, pp: 2}", "replicas": 1},
    "minimax": {"source": "miniature:minimax-m2.5", "layout": "{tp: 4, ep: true}", "replicas": 2},
}
REAL_WEIGHTS_GIB_PER_GPU = {"kimi": 71.8, "minimax": 53.6}
"""The story's weights per GPU (BENCHMARKS.md planner-calibration; Kimi-K2.5 INT4 at TP8,
MiniMax-M2.5 FP8 at TP4): what a wake would move on the real box."""
STORY_FIGURES = {
    "cold start": "~75 s (MiniMax-M2.5), tens of minutes (Kimi-K2.5)",
    "level-1 wake": "3-5 s published",
}
FAKE_ENGINE = {"start_s": 1.5, "sleep_s": 0.3, "wake_s": 2.0, "reload_s": 4.0}
"""The stand-in engine's times: the story's cold start scaled down 50 times, the published
level-1 wake about 2 times (a wake's fixed control-plane cost does not scale)."""


def fleet_file(sleep_level: int) -> str:
    """The story's two models, both `on_demand` and parked by sleeping at `sleep_level`."""
    lines = ["models:"]
    for name, model in STORY.items():
        lines += [
            f"  - name: {name}",
            f"    source: {model['source']}",
            f"    aliases: [{name}-chat]",
            f"    layout: {model['layout']}",
            f"    replicas: {model['replicas']}",
            "    residency: on_demand",
            "    park_mode: sleep",
            f"    sleep_level: {sleep_level}",
            "    min_resident_s: 0",
            "    park_after_idle_s: 3600",
        ]
    return "\n".join(lines) + "\n"


def inventory_file(head_ip: str) -> str:
    """The head as a control-plane node; the GPU node as the story's box."""
    return (
        "overrides:\n"
        f"  - node_ip: {head_ip}\n    host_ram_gib: 64\n"
        f"  - node_ip: {GPU_NODE_IP}\n    gpu_model: rtx-pro-6000\n    gpu_count: 8\n"
        "    gpu_memory_gib: 95.6\n    interconnect: pcie\n    host_ram_gib: 2048\n"
        "    disk_free_gib: 4000\n"
    )


def up_args(address: str, port: int, inventory: Path, fleet: Path) -> tuple[str, ...]:
    """`switchyard up` of the story's fleet on the cluster at `address`: the GPU path of
    placement and admission, on stand-in engines that sleep and wake in `FAKE_ENGINE`'s
    times."""
    return (
        "up", "--detach", "--fake-engines", "--accelerator", "gpu",
        "--fake-engine-settings", json.dumps(FAKE_ENGINE),
        "--address", address, "--port", str(port),
        "--inventory", str(inventory), "-f", str(fleet),
    )  # fmt: skip


def wake_rows(fleet: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each wake from sleep with the prediction the manager made for it: the physics
    estimate corrected by the model's earlier wakes (policies/wake_paths.py)."""
    from policies.wake_paths import PastWake, WakePath, correction

    rows = []
    for name, model in fleet["models"].items():
        history: list[PastWake] = []
        for wake in model.get("wakes", []):
            path = WakePath(wake["path"])
            predicted = wake["physics_s"] * correction(path, history)
            rows.append(
                {
                    "model": name,
                    "path": wake["path"],
                    "predicted_s": round(predicted, 2),
                    "measured_s": wake["measured_s"],
                    "ratio": round(wake["measured_s"] / predicted, 3) if predicted else None,
                }
            )
            history.append(PastWake(path, wake["physics_s"], wake["measured_s"]))
    return rows


def at_real_scale(sleep_level: int) -> dict[str, float]:
    """Each model's wake on the story's box at its real weights, before any correction."""
    from policies.inventory import gpu_profile
    from policies.units import GIB
    from policies.wake_paths import WakeLinks, WakePath, WakeWork, estimate

    links = WakeLinks(host_to_gpu_gbps=gpu_profile("rtx-pro-6000").host_link_gbps)
    path = WakePath.LEVEL_1 if sleep_level == 1 else WakePath.LEVEL_2
    out = {}
    for name, per_gpu_gib in REAL_WEIGHTS_GIB_PER_GPU.items():
        per_gpu = int(per_gpu_gib * GIB)
        work = WakeWork(per_gpu, per_gpu * 8)  # 8 ranks on the box for either model
        out[name] = round(estimate(path, work, links).predicted_s, 2)
    return out


def placements(apps: list[str]) -> dict[str, Any]:
    """Per Serve app of the fleet: the nodes and GPU fractions of its bundles."""
    from ray.util.placement_group import placement_group_table

    from serve_apps.internals import app_of_placement_group

    out: dict[str, Any] = {}
    for group in placement_group_table().values():
        app = app_of_placement_group(group["name"])
        if group.get("state") != "CREATED" or app not in apps:
            continue
        nodes = sorted(set(group["bundles_to_node_id"].values()))
        gpus = [b.get("GPU", 0.0) for b in group["bundles"].values()]
        entry = out.setdefault(app, {"groups": 0, "nodes": set(), "gpu_per_rank": set()})
        entry["groups"] += 1
        entry["nodes"].update(n[:12] for n in nodes)
        entry["gpu_per_rank"].update(gpus)
    return {
        app: {
            "groups": e["groups"],
            "nodes": sorted(e["nodes"]),
            "gpu_per_rank": sorted(e["gpu_per_rank"]),
        }
        for app, e in out.items()
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=SUITE.command, description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--phases", type=int, default=10)
    parser.add_argument("--phase-s", type=float, default=20.0)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--sleep-level", type=int, choices=(1, 2), default=1)
    parser.add_argument("--request-timeout-s", type=float, default=300.0)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/switchyard-sleep-story"))
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--markdown", type=Path, default=BENCHMARKS_MD)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    from cluster.startup.ray_auth import apply_token_auth_default

    apply_token_auth_default()  # before Ray is imported: it reads RAY_AUTH_MODE once
    import ray
    from ray.cluster_utils import Cluster

    from serve_apps.engine.fake_engine import FakeEngineSettings

    args.workdir.mkdir(parents=True, exist_ok=True)
    state = args.workdir / "state"
    fleet = args.workdir / "fleet.yaml"
    fleet.write_text(fleet_file(args.sleep_level))
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 4, "include_dashboard": False}
    )
    cluster.add_node(num_cpus=24, num_gpus=8, node_ip_address=GPU_NODE_IP)
    cluster.wait_for_nodes()
    assert cluster.head_node is not None
    inventory = args.workdir / "inventory.yaml"
    inventory.write_text(inventory_file(cluster.head_node.node_ip_address))
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    document: dict[str, Any] = {
        **run_record(SUITE, argv),
        "config": {
            "clients": args.clients,
            "phases": args.phases,
            "phase_s": args.phase_s,
            "max_tokens": args.max_tokens,
            "sleep_level": args.sleep_level,
            "fleet_file": fleet.read_text(),
            "fake_engine": FakeEngineSettings(**FAKE_ENGINE).model_dump(),
            "story_figures": STORY_FIGURES,
        },
    }
    since = time.time()
    env = {"RAY_ADDRESS": cluster.address}
    os.environ.update(env)
    up = switchyard_cli(state, *up_args(cluster.address, port, inventory, fleet))
    try:
        if up.returncode != 0:
            raise RuntimeError("switchyard up failed:\n" + up.stdout + up.stderr)
        document["up_s"] = round(time.time() - since, 1)
        aliases = [f"{name}-chat" for name in STORY]
        load_started = time.time()
        samples = asyncio.run(alternate(base_url, aliases, args))
        document["load_s"] = round(time.time() - load_started, 1)
        document["phases"] = phase_rows(samples, args)
        print(json.dumps(document["phases"], indent=2), flush=True)
        fleet_state = json.loads((state / "manager" / "fleet.json").read_text())
        document["wakes"] = wake_rows(fleet_state)
        ray.init(address=cluster.address, namespace="switchyard", log_to_driver=False)
        apps = [f"model-{n}-g{m['generation']}" for n, m in fleet_state["models"].items()]
        document["placements"] = placements(apps)
        document["gpu_node"] = next(
            n["NodeID"][:12] for n in ray.nodes() if n["Resources"].get("GPU")
        )
        ray.shutdown()
        document["operations"] = [
            {k: v for k, v in o.items() if k != "message"} | {"message": o["message"][:200]}
            for o in journal_since(state, since)
        ]
        document["samples"] = [asdict(s) for s in samples if s.status != 200]
    finally:
        switchyard_cli(state, "down", timeout_s=600)
        cluster.shutdown()
    document["load_after"] = load_average()
    document["real_scale_wake_s"] = at_real_scale(args.sleep_level)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / SUITE.result.name).write_text(json.dumps(document, indent=2) + "\n")
    write_block(args.markdown, SUITE, markdown(document))
    print(markdown(document), flush=True)
    return 0


def markdown(document: dict[str, Any]) -> str:
    m, config = document["machine"], document["config"]
    phases = document["phases"]
    total = {k: sum(p[k] for p in phases) for k in ("requests", "ok", "failed")}
    fake = config["fake_engine"]
    lines = [
        f"Run {document['date']} on {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; "
        f"load average {document['load_before']} before, {document['load_after']} after.",
        "",
        f"Command: `{document['command']}`",
        "",
        "The story's two models on one simulated box (8 logical GPUs as 8 x RTX PRO 6000, "
        "2 TB of host memory), both `on_demand` with `park_mode: sleep` "
        f"(`sleep_level: {config['sleep_level']}`), stand-in engines: start "
        f"{fake['start_s']:g} s (the story: {config['story_figures']['cold start']}), sleep "
        f"{fake['sleep_s']:g} s, wake {fake['wake_s']:g} s (the story: "
        f"{config['story_figures']['level-1 wake']}). {config['clients']} clients, "
        f"{config['phases']} phases of {config['phase_s']:g} s alternating between the two.",
        "",
        f"Requests: **{total['ok']} answered, {total['failed']} failed**, of {total['requests']}.",
        "",
        "| phase | alias | requests | answered | failed | longest wait (s) |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for p in phases:
        wait = "-" if p["longest_wait_s"] is None else f"{p['longest_wait_s']:.1f}"
        lines.append(
            f"| {p['phase']} | {p['alias']} | {p['requests']} | {p['ok']} | {p['failed']} "
            f"| {wait} |"
        )
    lines += [
        "",
        "Each wake from sleep: the manager's prediction (the bytes and links of "
        "`policies/wake_paths.py` at the miniatures' weights, corrected by the model's "
        "earlier wakes: the first is uncorrected) and the time it took, from the moment the "
        "other model was asleep (the route's `ready_by` is published then) to warmed; the "
        "whole hold is in the longest wait above.",
        "",
        "| model | path | predicted (s) | measured (s) | measured / predicted |",
        "|---|---|---:|---:|---:|",
    ]
    for w in document.get("wakes", []):
        lines.append(
            f"| {w['model']} | {w['path']} | {w['predicted_s']:.2f} | {w['measured_s']:.2f} "
            f"| {w['ratio']:.2f} |"
        )
    real = document["real_scale_wake_s"]
    lines += [
        "",
        "At the story's real weights (71.8 GiB per GPU for Kimi-K2.5 at TP8, 53.6 for "
        "MiniMax-M2.5 at TP4, 8 ranks each on the box; PCIe Gen5 host links), the same "
        "model predicts a wake of "
        + ", ".join(f"{n} {s:.1f} s" for n, s in real.items())
        + ", against a cold start of about 75 s for MiniMax-M2.5.",
        "",
        f"Placement (GPU node `{document.get('gpu_node', '?')}`): "
        + "; ".join(
            f"{app}: {p['groups']} group(s) on {', '.join(p['nodes'])}, "
            f"{'/'.join(f'{g:g}' for g in p['gpu_per_rank'])} GPU per rank"
            for app, p in document.get("placements", {}).items()
        )
        + ". The manager's operations, in order:",
        "",
    ]
    for o in document.get("operations", []):
        why = o["reason"] or o["trigger"] or ""
        lines.append(
            f"- {o['at_s']:.0f} s: {o['kind']} {o['model']}"
            f"{f' ({why})' if why else ''}: {o['outcome']}, {o['seconds']:.1f} s"
            f" — {o['message'][:110]}"
        )
    return "\n".join(lines)
