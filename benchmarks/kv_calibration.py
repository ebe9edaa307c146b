"""The planner's KV cache size against real vLLM start-up logs, cross-validated.

Not a test: for every log of benchmarks/kv_calibration_logs.yaml it predicts "GPU KV cache
size" as `switchyard plan` would for that deployment (its config, GPU, engine arguments,
environment and vLLM version) and prints the prediction over the logged figure, twice:

- in-sample: with the fitted constants (`policies.engine_memory.FittedConstants`) fitted to
  every log;
- left out: with the constants fitted to all the other logs, never to the one predicted.

Every other term is read from vLLM's code and fits nothing. The fit is a grid search that
minimises the sum of squared log ratios. It writes benchmarks/results/kv_calibration.json
and, with `--write`, redraws the suite's block in BENCHMARKS.md.

    python -m benchmarks run kv-calibration [--write]
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from benchmarks.calibration_logs import CalibrationLog, load_logs
from benchmarks.records import output_arguments, publish, run_record
from benchmarks.suites import suite_of
from policies.admission import admit
from policies.engine_memory import FittedConstants, MemoryTerm
from policies.units import GIB, MIB

SUITE = suite_of(__name__)

GRAPH_GRID = tuple(range(0, 2048 * 1024 + 1, 64 * 1024))
"""Bytes per captured size and dense layer: 0 to 2 MiB."""
RUNTIME_GRID = tuple(range(0, 2048 * MIB + 1, 64 * MIB))
"""Unmodelled non-torch bytes: 0 to 2 GiB."""
TARGET_WITHIN = 0.15
"""Every left-out prediction within 15 % of its log..."""
TARGET_SHARE_WITHIN_10 = 0.75
"""...and at least three in four within 10 %."""


@dataclass(frozen=True)
class Row:
    id: str
    model: str
    gpu: str
    layout: str
    kv: str
    vllm: str
    logged_tokens: int
    in_sample_tokens: int
    left_out_tokens: int
    left_out_constants: str
    logged_graph_gib: float | None
    in_sample_graph_gib: float
    counted: bool = True
    """Fitted and held to the target (False: a unified-memory GPU's log, shown only)."""

    @property
    def in_sample_ratio(self) -> float:
        return self.in_sample_tokens / self.logged_tokens

    @property
    def left_out_ratio(self) -> float:
        return self.left_out_tokens / self.logged_tokens


@dataclass(frozen=True)
class Prediction:
    kv_cache_tokens: int
    cuda_graph_bytes: int
    """The planner's CUDA-graph estimate for the deployment, whether or not its vLLM
    version subtracts it (compared with the graph memory a log prints)."""


def predict(log: CalibrationLog, constants: FittedConstants) -> Prediction:
    """The planner's KV tokens ("GPU KV cache size") and graph memory for `log`."""
    spec = log.spec()
    weights, inventory, request = log.weights(spec), log.inventory(), log.request(constants)
    judged = admit(spec, weights, inventory, request).candidate(log.layout())
    graphs = judged.memory_breakdown.get(MemoryTerm.CUDA_GRAPHS, 0)
    if not request.vllm.cuda_graphs_subtracted:
        on = replace(request, vllm=replace(request.vllm, cuda_graphs_subtracted=True))
        counted = admit(spec, weights, inventory, on).candidate(log.layout())
        graphs = counted.memory_breakdown.get(MemoryTerm.CUDA_GRAPHS, 0)
    return Prediction(judged.kv_cache_tokens, graphs)


def _grid() -> list[FittedConstants]:
    return [
        FittedConstants(graph_bytes_per_dense_layer=g, runtime_bytes=r)
        for g in GRAPH_GRID
        for r in RUNTIME_GRID
    ]


def _loss(predicted: Sequence[Prediction], logs: Sequence[CalibrationLog]) -> float:
    """Squared log ratios of every logged figure the constants move: each log's KV tokens,
    and its CUDA-graph memory where it prints one."""
    total = 0.0
    for p, log in zip(predicted, logs, strict=True):
        total += math.log(max(p.kv_cache_tokens, 1) / log.logged.gpu_kv_cache_tokens) ** 2
        graphs = log.logged.cuda_graph_gib
        if graphs is not None:
            total += math.log(max(p.cuda_graph_bytes, 1) / (graphs * GIB)) ** 2
    return total


def fit(
    table: dict[FittedConstants, list[Prediction]],
    logs: list[CalibrationLog],
    keep: list[int],
) -> FittedConstants:
    """The grid point whose predictions of the logs at `keep` are closest to theirs (ties:
    the smaller constants, the grid's order)."""
    kept = [logs[i] for i in keep]
    return min(table, key=lambda c: _loss([table[c][i] for i in keep], kept))


def rows(logs: list[CalibrationLog]) -> tuple[list[Row], FittedConstants]:
    """Each log's in-sample and left-out prediction, and the constants fitted to all the
    counted logs. A log that is not counted (`GpuSpec.unified_memory`) is in no fit: both
    its predictions use the constants fitted to all the counted ones."""
    grid = _grid()
    table = {c: [predict(log, c) for log in logs] for c in grid}
    counted = [i for i, log in enumerate(logs) if not log.gpu.unified_memory]
    fitted = fit(table, logs, counted)
    out = []
    for i, log in enumerate(logs):
        others = fit(table, logs, [j for j in counted if j != i]) if i in counted else fitted
        e = log.request()
        out.append(
            Row(
                id=log.id,
                model=log.model,
                gpu=log.gpu.name or log.gpu.profile,
                layout=str(log.layout()),
                kv=str(e.kv_cache_dtype),
                vllm=log.vllm_version,
                logged_tokens=log.logged.gpu_kv_cache_tokens,
                in_sample_tokens=table[fitted][i].kv_cache_tokens,
                left_out_tokens=table[others][i].kv_cache_tokens,
                left_out_constants=_describe(others),
                logged_graph_gib=log.logged.cuda_graph_gib,
                in_sample_graph_gib=round(table[fitted][i].cuda_graph_bytes / GIB, 2),
                counted=i in counted,
            )
        )
    return out, fitted


def _describe(c: FittedConstants) -> str:
    return (
        f"{c.graph_bytes_per_dense_layer // 1024} KiB/graph/layer, "
        f"{c.runtime_bytes // MIB} MiB runtime"
    )


def verdict(found: list[Row]) -> dict[str, Any]:
    """The target over the counted logs."""
    counted = [r for r in found if r.counted]
    worst = max(abs(r.left_out_ratio - 1) for r in counted)
    within_10 = sum(1 for r in counted if abs(r.left_out_ratio - 1) <= 0.10) / len(counted)
    return {
        "logs": len(counted),
        "shown_not_counted": len(found) - len(counted),
        "worst_left_out_error": round(worst, 4),
        "left_out_within_10_percent": round(within_10, 3),
        "target_met": worst <= TARGET_WITHIN and within_10 >= TARGET_SHARE_WITHIN_10,
    }


def table(found: list[Row]) -> str:
    lines = [
        "| log | GPU | layout | KV | vLLM | logged tokens | in-sample | ratio | left out | ratio "
        "| graphs logged / in-sample (GiB) |",
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in found:
        graphs = "" if r.logged_graph_gib is None else f"{r.logged_graph_gib:.2f} / "
        name = r.id if r.counted else f"{r.id} (unified memory: not counted)"
        lines.append(
            f"| {name} | {r.gpu} | {r.layout} | {r.kv} | {r.vllm} | {r.logged_tokens:,} | "
            f"{r.in_sample_tokens:,} | {r.in_sample_ratio:.3f} | {r.left_out_tokens:,} | "
            f"{r.left_out_ratio:.3f} | {graphs}{r.in_sample_graph_gib:.2f} |"
        )
    return "\n".join(lines)


def markdown(document: dict[str, Any]) -> str:
    """The suite's block in BENCHMARKS.md, from its result file."""
    found = [Row(**row) for row in document["rows"]]
    v = document["verdict"]
    shown = v.get("shown_not_counted", 0)
    also = f" (and {shown} shown, not counted)" if shown else ""
    summary = (
        f"{v['logs']} logs{also}. Left out: worst error {v['worst_left_out_error']:.1%}, "
        f"{v['left_out_within_10_percent']:.0%} within 10 % (target: every one within 15 %, "
        f"three in four within 10 %: {'met' if v['target_met'] else 'NOT met'}). Constants "
        f"fitted to all counted logs: {document['fitted']}."
    )
    return f"Command: `{document['command']}`\n\n{summary}\n\n{table(found)}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=SUITE.command, description=__doc__.splitlines()[0])
    output_arguments(parser)
    args = parser.parse_args(argv)
    found, fitted = rows(load_logs())
    document = {
        **run_record(SUITE, argv),
        "fitted": _describe(fitted),
        "fitted_constants": asdict(fitted),
        "verdict": verdict(found),
        "rows": [asdict(row) for row in found],
    }
    print(table(found))
    print(json.dumps(document["verdict"]))
    publish(SUITE, document, args, markdown(document))
    return 0
