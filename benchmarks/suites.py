"""The suites `python -m benchmarks` knows, as data: one record per suite.

A suite is a module with two functions: `main(argv) -> int` runs it (its own option parser,
`--help` included) and writes its result file; `markdown(document) -> str` renders its
block in BENCHMARKS.md from that file alone, so `python -m benchmarks report SUITE` redraws
the block without a run. Nothing here imports a suite: `list` stays instant, and a suite's
heavy imports (Ray, vLLM, matplotlib) load only when it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "benchmarks" / "results"
BENCHMARKS_MD = REPO_ROOT / "BENCHMARKS.md"


@dataclass(frozen=True)
class Suite:
    """One measurement the project repeats: what it is, where its code and result live."""

    name: str
    summary: str
    module: str

    @property
    def result(self) -> Path:
        """The one latest result; earlier ones are in git history."""
        return RESULTS / f"{self.name.replace('-', '_')}.json"

    @property
    def command(self) -> str:
        """How a user starts it, as records and help texts print it."""
        return f"python -m benchmarks run {self.name}"


SUITES: tuple[Suite, ...] = (
    Suite(
        "serving-comparison",
        "one miniature served by vLLM's server, Ray Serve LLM and Switchyard, rounds alternating",
        "benchmarks.serving_comparison",
    ),
    Suite(
        "relay-capacity",
        "the gateway's CPU per relayed chunk against nginx, HAProxy and an earlier checkout",
        "benchmarks.relay_capacity",
    ),
    Suite(
        "swap-time",
        "a cold start against make-before-break and break-before-make swaps under load",
        "benchmarks.swap_time",
    ),
    Suite(
        "on-demand",
        "two on-demand models on one accelerator slot, clients alternating: parks, wakes, holds",
        "benchmarks.on_demand",
    ),
    Suite(
        "sleep-story",
        "the story's two models taking turns by vLLM's sleep mode on 8 simulated GPUs",
        "benchmarks.sleep_story",
    ),
    Suite(
        "soak",
        "constant load for minutes with a hot swap in the middle: errors, latency, memory",
        "benchmarks.soak",
    ),
    Suite(
        "planner-calibration",
        "the planner's predictions against published vLLM measurements (no engine)",
        "benchmarks.planner_calibration",
    ),
    Suite(
        "kv-calibration",
        "the planner's KV cache size against real vLLM logs, each predicted left out of the fit",
        "benchmarks.kv_calibration",
    ),
    Suite(
        "head-loss",
        "a GCS killed under load: a plain head against a fault-tolerant one (--gcs-store)",
        "benchmarks.head_loss",
    ),
    Suite(
        "plan-latency",
        "wall time of `switchyard plan` per reference config, in fresh processes",
        "benchmarks.plan_latency",
    ),
    Suite(
        "scale",
        "one stack of fake engines grown to 48 models: commands, gateway, control plane, limits",
        "benchmarks.scale",
    ),
)


def find(name: str) -> Suite:
    """The suite called `name`; SystemExit naming the known ones otherwise."""
    for suite in SUITES:
        if suite.name == name:
            return suite
    known = ", ".join(s.name for s in SUITES)
    raise SystemExit(f"no suite {name!r}; the suites are: {known}")


def suite_of(module: str) -> Suite:
    """The suite a module implements (a suite module's `SUITE = suite_of(__name__)`)."""
    for suite in SUITES:
        if suite.module == module:
            return suite
    # Run as a file or `python -m benchmarks.x`, a module is `__main__`: one front door.
    raise SystemExit(f"{module} is not a suite module; run `python -m benchmarks run SUITE`")
