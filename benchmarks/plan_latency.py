"""Wall time of `switchyard plan` per reference config, each in a fresh subprocess.

Not a test: it prints a table. Each run is a new interpreter, as an operator would start it,
so the figure includes Python start-up and every import on the command's path.

    python benchmarks/plan_latency.py [--repeat 5] [--gpu rtx-pro-6000 --gpus-per-node 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIRS = (REPO_ROOT.parent / "shared" / "reference" / "configs",)


def reference_configs() -> list[Path]:
    """The shared reference configs when present, else the copies inside the package."""
    for folder in CONFIG_DIRS:
        found = sorted(folder.glob("*.json"))
        if found:
            return found
    package = resources.files("switchyard").joinpath("reference_configs")
    return sorted(Path(str(p)) for p in package.iterdir() if p.name.endswith(".json"))


def time_plan(config: Path, extra: list[str]) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "-m", "switchyard", "plan", str(config), "--json", *extra]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, env=env, check=False)
    return time.perf_counter() - started, done.returncode


def time_admit_in_process(config: Path, gpu: str, gpus_per_node: int, nodes: int) -> float:
    """The policy alone: parse the config and decide, without interpreter start-up."""
    sys.path.insert(0, str(REPO_ROOT))
    from policies.admission import AdmissionRequest, admit
    from policies.hf_config import load_model_spec
    from policies.inventory import ClusterInventory

    started = time.perf_counter()
    spec = load_model_spec(config)
    admit(spec, None, ClusterInventory.homogeneous(gpu, nodes, gpus_per_node), AdmissionRequest())
    return time.perf_counter() - started


def time_python_startup() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--gpu", default="rtx-pro-6000")
    parser.add_argument("--gpus-per-node", default="8")
    parser.add_argument("--nodes", default="1")
    args = parser.parse_args()
    extra = ["--gpu", args.gpu, "--gpus-per-node", args.gpus_per_node, "--nodes", args.nodes]
    baseline = statistics.median(time_python_startup() for _ in range(args.repeat))
    print(f"python start-up alone: {baseline * 1000:.0f} ms (median of {args.repeat})")
    print(f"{'config':32} {'exit':>4} {'median ms':>10} {'max ms':>8} {'admit() ms':>11}")
    for config in reference_configs():
        runs = [time_plan(config, extra) for _ in range(args.repeat)]
        times = [t for t, _ in runs]
        codes = {code for _, code in runs}
        in_process = statistics.median(
            time_admit_in_process(config, args.gpu, int(args.gpus_per_node), int(args.nodes))
            for _ in range(args.repeat)
        )
        print(
            f"{config.name:32} {','.join(map(str, sorted(codes))):>4} "
            f"{statistics.median(times) * 1000:>10.0f} {max(times) * 1000:>8.0f} "
            f"{in_process * 1000:>11.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
