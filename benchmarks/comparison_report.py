"""The serving comparison's block in BENCHMARKS.md, drawn from its result file alone.

The machine record every suite shares is in records.py; this module turns a
serving-comparison document (its median rows, round ratios, the gateway's CPU against a
baseline, CPU per process) into Markdown.
"""

from __future__ import annotations

from typing import Any

from benchmarks.comparison_systems import LABELS
from switchyard.bench.level_metrics import LevelMetrics


def ratio(value: float, reference: float | None) -> str:
    return f"{value / reference:.2f}x" if reference else "-"


def markdown_table(document: dict[str, Any]) -> str:
    systems: dict[str, Any] = document["systems"]
    by_level: dict[str, dict[int, LevelMetrics]] = {
        s: {m.concurrency: m for m in map(LevelMetrics.from_json, r.get("levels", []))}
        for s, r in systems.items()
    }
    lines = [
        "| system | concurrency | output tok/s | vs direct | vs vLLM server | TTFT p50 ms "
        "| TTFT p99 ms | TPOT p50 ms | ITL p50 ms | E2E p50 ms | failed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for level in document["config"]["concurrency"]:
        direct = _tok_s(by_level.get("direct", {}).get(level))
        server = _tok_s(by_level.get("vllm-server", {}).get(level))
        for system in systems:
            m = by_level[system].get(level)
            if m is None:
                continue
            lines.append(
                f"| {LABELS[system]} | {level} | {m.output_tokens_per_s:,.0f} "
                f"| {ratio(m.output_tokens_per_s, direct)} "
                f"| {ratio(m.output_tokens_per_s, server)} "
                f"| {_p(m.ttft, 'p50_ms')} | {_p(m.ttft, 'p99_ms')} | {_p(m.tpot, 'p50_ms')} "
                f"| {_p(m.itl, 'p50_ms')} | {_p(m.e2el, 'p50_ms')} | {m.failed} |"
            )
    starts = ", ".join(
        f"{LABELS[s]} {r['start_s']:.0f} s" for s, r in systems.items() if "start_s" in r
    )
    errors = [f"- {LABELS[s]}: {r['error']}" for s, r in systems.items() if "error" in r]
    config = document["config"]
    header = [
        f"Run {document['date']} on {document['machine']['cpu']}, "
        f"{document['machine']['cores']} cores, {document['machine']['memory_gib']} GiB; "
        f"load average {document['load_before']} before, {document['load_after']} after "
        "(other jobs shared the machine).",
        "",
        f"Command: `{document['command']}`",
        "",
        f"Miniature `{config['miniature']}`, {config['num_prompts']} requests per level, "
        f"{config['input_len']} prompt tokens, {config['output_len']} output tokens "
        "(ignore_eos), all requests released at once and capped by the concurrency; versions "
        f"{document['machine']['versions']}.",
        "",
        *fairness_lines(document),
    ]
    footer = [
        *ratio_lines(document),
        *gateway_cpu_lines(document),
        "",
        f"Start-up to first ready (cold, median): {starts}.",
        *cpu_lines(document),
    ]
    if errors:
        footer += ["", "Systems that did not finish:", *errors]
    footer += ["", "![throughput and TTFT](benchmarks/results/serving_comparison.png)"]
    return "\n".join(header + lines + footer)


def fairness_lines(document: dict[str, Any]) -> list[str]:
    config = document["config"]
    if "engine_args" not in config:
        return []
    args = ", ".join(f"{k}={v}" for k, v in config["engine_args"].items())
    env = ", ".join(f"{k}={v}" for k, v in config["engine_env"].items())
    lines = [
        f"Every engine but Ray Serve LLM's (its defaults) ran with {args}; environment {env}. "
        f"Each row is the median of {config.get('rounds', 1)} rounds (the lower middle one for "
        "an even count), the systems' order alternating round by round.",
    ]
    logged = {
        s: _config_fields(r["engine_config"])
        for s, r in document["systems"].items()
        if r.get("engine_config")
    }
    if logged:
        shown = ("max_seq_len", "enforce_eager", "dtype", "kv_cache_dtype", "reasoning_parser")
        first = next(iter(logged.values()))
        same = all(fields == first for fields in logged.values())
        lines.append(
            "The engines' own configuration records (vLLM's `Initializing a V1 LLM engine` "
            f"line) are {'identical' if same else 'NOT identical'}"
            + (f" across {', '.join(LABELS[s] for s in logged)}" if same else "")
            + ": "
            + ", ".join(f"{k}={first.get(k, '?')}" for k in shown)
            + "."
        )
    return [*lines, ""]


def _config_fields(line: str) -> dict[str, str]:
    """`key=value` pairs of vLLM's configuration line (nested values kept as text)."""
    fields: dict[str, str] = {}
    for part in line.split(", "):
        key, sep, value = part.partition("=")
        if sep and key.isidentifier():
            fields[key] = value
    return fields


def ratio_lines(document: dict[str, Any]) -> list[str]:
    ratios: dict[str, Any] = document.get("ratios") or {}
    if not ratios:
        return []
    lines = [
        "",
        "| concurrency | Switchyard / vLLM server, each round | median | TTFT p50 ms, "
        "Switchyard / vLLM server (medians) |",
        "|---:|---|---:|---|",
    ]
    for level, row in ratios.items():
        each = ", ".join(f"{r:.2f}x" for r in row["ratios"])
        lines.append(
            f"| {level} | {each} | **{row['median_ratio']:.2f}x** "
            f"| {row['ttft_p50_ms_switchyard']:.1f} / {row['ttft_p50_ms_vllm_server']:.1f} |"
        )
    return lines


def gateway_cpu_lines(document: dict[str, Any]) -> list[str]:
    """The gateway's CPU per streamed token, this checkout's against `--baseline`'s."""
    rows: dict[str, Any] = document.get("gateway_cpu") or {}
    if not rows:
        return []
    lines = [
        "",
        f"The gateway replica's CPU per streamed token (microseconds; its CPU seconds in the "
        f"level over the level's output tokens), against the baseline "
        f"{document.get('baseline_commit', '')}, run in the same rounds:",
        "",
        "| concurrency | now, each round | baseline, each round | now / baseline, each round "
        "| median |",
        "|---:|---|---|---|---:|",
    ]
    for level, row in rows.items():
        now = ", ".join(f"{x:.0f}" for x in row["now_us"])
        before = ", ".join(f"{x:.0f}" for x in row["before_us"])
        each = ", ".join(f"{r:.2f}x" for r in row["ratios"])
        lines.append(f"| {level} | {now} | {before} | {each} | **{row['median_ratio']:.2f}x** |")
    return lines


def cpu_lines(document: dict[str, Any]) -> list[str]:
    """CPU seconds per process role, per system and level, where they were recorded."""
    lines: list[str] = []
    for system, result in document["systems"].items():
        for level in result.get("levels", []):
            used = level.get("cpu_s_by_role")
            if not used:
                continue
            available = level["duration_s"] * (document["machine"]["cores"] or 1)
            parts = ", ".join(f"{role} {seconds:.1f}" for role, seconds in used.items())
            lines.append(
                f"- {LABELS[system]}, concurrency {level['concurrency']} "
                f"({level['duration_s']:.1f} s, {available:.0f} core-s): {parts}"
            )
    if lines:
        lines = ["", "CPU seconds per process during each level:", "", *lines]
    return lines


def _tok_s(metrics: LevelMetrics | None) -> float | None:
    return None if metrics is None else metrics.output_tokens_per_s


def _p(d: Any, field: str) -> str:
    return "-" if d is None else f"{getattr(d, field):,.1f}"
