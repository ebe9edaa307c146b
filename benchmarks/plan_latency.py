"""Wall time of `switchyard plan` per reference config, each in a fresh subprocess.

Not a test: it prints a table, writes benchmarks/results/plan_latency.json and redraws the
suite's block in BENCHMARKS.md. Each run is a new interpreter, as an operator would start
it, so the figure includes Python start-up and every import on the command's path; the
policy alone (`admit()` in this process, no start-up) is timed beside it.

    python -m benchmarks run plan-latency [--repeat 5] [--gpu rtx-pro-6000 --gpus-per-node 8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

from benchmarks.records import run_record, write_block
from benchmarks.suites import BENCHMARKS_MD, REPO_ROOT, RESULTS, suite_of
from policies.admission import AdmissionRequest, admit
from policies.checkpoint.hf_config import load_model_spec
from policies.inventory import ClusterInventory

SUITE = suite_of(__name__)
CONFIG_DIRS = (REPO_ROOT.parent / "shared" / "reference" / "configs",)


def reference_configs() -> list[Path]:
    """The shared reference configs when present, else the copies shipped with the miniatures."""
    for folder in CONFIG_DIRS:
        found = sorted(folder.glob("*.json"))
        if found:
            return found
    import cluster.miniature_generator.reference as shipped

    package = resources.files(shipped.__package__ or "").joinpath("reference_configs")
    return sorted(Path(str(p)) for p in package.iterdir() if p.name.endswith(".json"))


def time_plan(config: Path, extra: list[str]) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "-m", "switchyard", "plan", str(config), "--json", *extra]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, env=env, check=False)
    return time.perf_counter() - started, done.returncode


def time_admit_in_process(config: Path, gpu: str, gpus_per_node: int, nodes: int) -> float:
    """The policy alone: parse the config and decide, without interpreter start-up."""
    started = time.perf_counter()
    spec = load_model_spec(config)
    admit(spec, None, ClusterInventory.homogeneous(gpu, nodes, gpus_per_node), AdmissionRequest())
    return time.perf_counter() - started


def time_python_startup() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


def markdown(document: dict[str, Any]) -> str:
    """The suite's block in BENCHMARKS.md, from its result file."""
    config = document["config"]
    lines = [
        f"Run {document['date']} on {document['machine']['cpu']}, "
        f"{document['machine']['cores']} cores; load average {document['load_before']} before.",
        "",
        f"Command: `{document['command']}`",
        "",
        f"`switchyard plan CONFIG --json --gpu {config['gpu']} --gpus-per-node "
        f"{config['gpus_per_node']} --nodes {config['nodes']}`, {config['repeat']} runs per "
        f"config, each a new interpreter; Python's own start-up alone: "
        f"{document['python_startup_ms']:.0f} ms (median).",
        "",
        "| config | exit codes | median ms | max ms | admit() alone, ms |",
        "|---|---|---:|---:|---:|",
    ]
    for row in document["configs"]:
        lines.append(
            f"| {row['config']} | {', '.join(map(str, row['exit_codes']))} "
            f"| {row['median_ms']:.0f} | {row['max_ms']:.0f} | {row['admit_ms']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=SUITE.command, description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--gpu", default="rtx-pro-6000")
    parser.add_argument("--gpus-per-node", default="8")
    parser.add_argument("--nodes", default="1")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--markdown", type=Path, default=BENCHMARKS_MD)
    args = parser.parse_args(argv)
    extra = ["--gpu", args.gpu, "--gpus-per-node", args.gpus_per_node, "--nodes", args.nodes]
    document: dict[str, Any] = {
        **run_record(SUITE, argv),
        "config": {
            "repeat": args.repeat,
            "gpu": args.gpu,
            "gpus_per_node": args.gpus_per_node,
            "nodes": args.nodes,
        },
        "python_startup_ms": round(
            1000 * statistics.median(time_python_startup() for _ in range(args.repeat)), 1
        ),
        "configs": [],
    }
    for config in reference_configs():
        runs = [time_plan(config, extra) for _ in range(args.repeat)]
        in_process = statistics.median(
            time_admit_in_process(config, args.gpu, int(args.gpus_per_node), int(args.nodes))
            for _ in range(args.repeat)
        )
        document["configs"].append(
            {
                "config": config.name,
                "exit_codes": sorted({code for _, code in runs}),
                "median_ms": round(1000 * statistics.median(t for t, _ in runs), 1),
                "max_ms": round(1000 * max(t for t, _ in runs), 1),
                "admit_ms": round(1000 * in_process, 2),
            }
        )
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / SUITE.result.name).write_text(json.dumps(document, indent=2) + "\n")
    table = markdown(document)
    print(table)
    write_block(args.markdown, SUITE, table)
    return 0
