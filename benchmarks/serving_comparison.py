"""Switchyard's gateway against the alternatives, in one run on one machine and one miniature.

Four systems serve the same miniature (MiniMax-M2.5-shaped by default), one after the other
(never two engines at once), each with `enforce_eager` and VLLM_CPU_KVCACHE_SPACE=1:

  direct         vLLM AsyncLLM in-process, no HTTP (the ceiling; direct_engine.py)
  vllm-server    vLLM's own OpenAI server, `python -m vllm.entrypoints.openai.api_server`
  ray-serve-llm  Ray Serve LLM's `build_openai_app`, defaults (ray_serve_llm_app.py)
  switchyard     `switchyard up` (Ray Serve LLM engine app behind Switchyard's gateway)

The three HTTP servers are loaded by `switchyard bench`'s client (switchyard.bench) with the
same exact-length prompts; the direct engine gets the same prompts as token ids. Results go
to benchmarks/results/serving_comparison.json (and .png) and between the suite's markers in
BENCHMARKS.md.

    .venv/bin/python -m benchmarks run serving-comparison          # everything, ~30-60 min
    .venv/bin/python -m benchmarks run serving-comparison --systems vllm-server,switchyard
    .venv/bin/python -m benchmarks run serving-comparison --systems vllm-server,switchyard \
        --baseline /tmp/base      # also `switchyard up` from an earlier checkout, same rounds

With `--baseline DIR`, each round also runs Switchyard from the checkout in DIR and the
report gives the gateway replica's CPU per streamed token, this checkout's against that
one's, round by round (the relay cost the data-path issue measured on this benchmark).

How each system is run is in comparison_systems.py; the Markdown block in
comparison_report.py. Not a test: nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.comparison_report import markdown_table
from benchmarks.comparison_systems import (
    BASELINE,
    ENGINE_ARGS,
    ENGINE_ENV,
    LABELS,
    RUNNERS,
    SYSTEMS,
    Run,
    gateway_cpu_s,
)
from benchmarks.records import (
    baseline_commit,
    load_average,
    lower_median,
    run_record,
    write_block,
)
from benchmarks.suites import BENCHMARKS_MD, RESULTS, suite_of
from switchyard.bench.level_metrics import LevelMetrics
from switchyard.bench.plot import plot_series
from switchyard.bench.prompts import exact_length_prompts

SUITE = suite_of(__name__)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=SUITE.command, description=__doc__.split("\n\n")[0])
    parser.add_argument("--miniature", default="minimax-m2.5")
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--num-prompts", type=int, default=128)
    parser.add_argument("--num-warmups", type=int, default=8)
    parser.add_argument(
        "--concurrency", type=lambda s: tuple(int(x) for x in s.split(",")), default=(1, 32, 128)
    )
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="runs of every system, alternating the order round by round; medians reported",
    )
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/switchyard-serving-comparison"))
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--markdown", type=Path, default=BENCHMARKS_MD)
    parser.add_argument("--start-timeout-s", type=float, default=900)
    parser.add_argument("--system-timeout-s", type=float, default=3600)
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of an earlier commit: its Switchyard runs too, in the same rounds "
        "(implies --cpu-breakdown)",
    )
    parser.add_argument(
        "--cpu-breakdown",
        action="store_true",
        help="record CPU seconds per process role during each level (HTTP systems)",
    )
    return parser.parse_args(argv)


def run_system(system: str, run: Run) -> dict[str, Any]:
    try:
        result = RUNNERS[system](run)
        for level in result["levels"]:
            print(
                f"{system}: concurrency {level['concurrency']}: "
                f"{level['output_tokens_per_s']:,.1f} output tok/s",
                flush=True,
            )
        return result
    except Exception as exc:  # one system failing must not lose the others' numbers
        print(f"{system} failed: {exc!r}", flush=True)
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}


def median_systems(rounds: list[dict[str, Any]], systems: list[str]) -> dict[str, Any]:
    """Per system, each level's record from its median round by output tokens/s."""
    out: dict[str, Any] = {}
    for system in systems:
        done = [r[system] for r in rounds if r.get(system, {}).get("levels")]
        if not done:
            out[system] = next((r[system] for r in rounds if system in r), {"error": "not run"})
            continue
        levels = []
        for index in range(len(done[0]["levels"])):
            runs = [d["levels"][index] for d in done]
            levels.append(lower_median(runs, "output_tokens_per_s"))
        out[system] = {
            "start_s": statistics.median(d["start_s"] for d in done),
            "levels": levels,
            "engine_config": done[0].get("engine_config", ""),
        }
    return out


def round_ratios(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Switchyard / vLLM's server, per level: each round's ratio and their median; and
    TTFT p50 of both, as medians."""
    per_level: dict[int, dict[str, list[float]]] = {}
    for mine, other in _paired_levels(rounds, "switchyard", "vllm-server"):
        row = per_level.setdefault(mine["concurrency"], {"ratio": [], "ttft": [], "v": []})
        row["ratio"].append(mine["output_tokens_per_s"] / other["output_tokens_per_s"])
        row["ttft"].append(_ttft_p50_ms(mine))
        row["v"].append(_ttft_p50_ms(other))
    return {
        str(level): {
            "ratios": [round(r, 3) for r in row["ratio"]],
            "median_ratio": round(statistics.median(row["ratio"]), 3),
            "ttft_p50_ms_switchyard": round(statistics.median(row["ttft"]), 1),
            "ttft_p50_ms_vllm_server": round(statistics.median(row["v"]), 1),
        }
        for level, row in sorted(per_level.items())
    }


def gateway_cpu(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The gateway replica's CPU microseconds per streamed output token, per level: this
    checkout's and the baseline's in each round, their ratio per round and its median."""
    per_level: dict[int, dict[str, list[float]]] = {}
    for mine, theirs in _paired_levels(rounds, "switchyard", BASELINE):
        now_us, before_us = _gateway_us_per_token(mine), _gateway_us_per_token(theirs)
        if now_us is None or before_us is None:
            print(f"no gateway CPU recorded at concurrency {mine['concurrency']}", flush=True)
            continue
        row = per_level.setdefault(mine["concurrency"], {"now": [], "before": [], "ratio": []})
        row["now"].append(now_us)
        row["before"].append(before_us)
        row["ratio"].append(now_us / before_us)
    return {
        str(level): {
            "now_us": [round(x, 1) for x in row["now"]],
            "before_us": [round(x, 1) for x in row["before"]],
            "ratios": [round(r, 3) for r in row["ratio"]],
            "median_ratio": round(statistics.median(row["ratio"]), 3),
        }
        for level, row in sorted(per_level.items())
    }


def _paired_levels(
    rounds: list[dict[str, Any]], system: str, other: str
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(`system`'s level, `other`'s same level) of every round where both finished."""
    for result in rounds:
        ours = result.get(system, {}).get("levels")
        theirs = result.get(other, {}).get("levels")
        if ours and theirs:
            yield from zip(ours, theirs, strict=True)


def _gateway_us_per_token(level: dict[str, Any]) -> float | None:
    seconds = gateway_cpu_s(level.get("cpu_s_by_role", {}))
    if not seconds:
        return None
    return 1e6 * seconds / max(1, int(level["total_output_tokens"]))


def _ttft_p50_ms(level: dict[str, Any]) -> float:
    ttft = LevelMetrics.from_json(level).ttft
    return ttft.p50_ms if ttft is not None else float("nan")


def markdown(document: dict[str, Any]) -> str:
    """The suite's block in BENCHMARKS.md (comparison_report.py draws it)."""
    return markdown_table(document)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        raise SystemExit(f"--systems: unknown {unknown}; choose from {', '.join(SYSTEMS)}")
    if args.baseline is not None:
        if not (args.baseline / "serve_apps").is_dir():
            raise SystemExit(f"--baseline: {args.baseline} is not a Switchyard checkout")
        systems.append(BASELINE)
        args.cpu_breakdown = True
    from transformers import AutoTokenizer

    from cluster.miniature_generator import ensure_miniature

    args.workdir.mkdir(parents=True, exist_ok=True)
    # The directory `switchyard up` stages this miniature into, so all four load the same files.
    model_dir = ensure_miniature(args.miniature, args.workdir / "switchyard/cache/miniatures")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompts = exact_length_prompts(
        tokenizer, count=args.num_warmups + args.num_prompts, input_len=args.input_len
    )
    (args.workdir / "prompts.json").write_text(
        json.dumps([{"text": p.text, "token_ids": tokenizer.encode(p.text)} for p in prompts])
    )
    run = Run(args, model_dir, f"mini-{args.miniature}", tuple(prompts), args.workdir)
    document: dict[str, Any] = {
        **run_record(SUITE, argv),
        "config": {
            "miniature": args.miniature,
            "input_len": args.input_len,
            "output_len": args.output_len,
            "num_prompts": args.num_prompts,
            "num_warmups": args.num_warmups,
            "concurrency": list(args.concurrency),
            "engine_env": ENGINE_ENV,
            "engine_args": ENGINE_ARGS,
            "rounds": args.rounds,
        },
        "systems": {},
    }
    document["rounds"] = []
    for round_index in range(args.rounds):
        # Alternate the order: drift on a shared machine then favours no system.
        order = systems if round_index % 2 == 0 else systems[::-1]
        results: dict[str, Any] = {}
        for system in order:
            print(f"== round {round_index}: {system} (load {load_average()})", flush=True)
            results[system] = run_system(system, run)
        document["rounds"].append(results)
        # Kept as it goes: a late failure must not lose the rounds already run.
        partial = args.workdir / "serving_comparison.partial.json"
        partial.write_text(json.dumps(document, indent=2))
    document["systems"] = median_systems(document["rounds"], systems)
    document["ratios"] = round_ratios(document["rounds"])
    if args.baseline is not None:
        document["baseline_commit"] = baseline_commit(args.baseline, "%h (%cs)")
        document["gateway_cpu"] = gateway_cpu(document["rounds"])
    document["load_after"] = load_average()
    args.results.mkdir(parents=True, exist_ok=True)
    result = args.results / SUITE.result.name
    result.write_text(json.dumps(document, indent=2))
    series = {
        LABELS[s]: [LevelMetrics.from_json(level) for level in r["levels"]]
        for s, r in document["systems"].items()
        if r.get("levels")
    }
    if series:
        plot_series(
            result.with_suffix(".png"),
            series,
            title=f"{run.name}: {args.input_len} in / {args.output_len} out tokens, "
            f"{args.num_prompts} requests",
        )
    write_block(args.markdown, SUITE, markdown(document))
    print(f"wrote {result}, its .png and {args.markdown}", flush=True)
    return 0
