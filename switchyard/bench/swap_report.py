"""`switchyard bench --during-swap`'s results: a rich table (for people) and a JSON document
(for scripts and the swap-time benchmark suite, benchmarks/swap_time.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.table import Table

from switchyard.bench.during_swap import SwapLoadResult
from switchyard.bench.swap_window import Gap

JSON_SCHEMA = "switchyard-bench-swap/1"


def swap_table(result: SwapLoadResult, title: str) -> Table:
    window, operation = result.window, result.operation
    table = Table(title=title, show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    outcome = "manager died" if operation is None else operation.outcome.value
    table.add_row("swap outcome", outcome)
    if operation is not None and operation.strategy is not None:
        table.add_row("strategy", f"{operation.strategy.value} ({operation.strategy_reason})")
    if operation is not None and operation.details.alias_unavailable_s is not None:
        for alias, seconds in operation.details.alias_unavailable_s.items():
            table.add_row(f"alias {alias} without a model (manager)", _s(seconds))
    for span in window.phases:
        table.add_row(f"  phase {span.phase}", f"{span.seconds:.1f} s (at {span.start_s:.1f} s)")
    table.add_row("requests ok / failed", f"{window.succeeded} / {window.failed}")
    answered = ", ".join(f"{name} {n}" for name, n in window.answered_by.items())
    table.add_row("answered by", answered or "-")
    table.add_row(
        "unavailability (first affected send -> NEW's first token)", _s(window.unavailability_s)
    )
    table.add_row("held requests", str(window.held_requests))
    table.add_row("longest held (TTFT of a held request)", _s(window.longest_held_s))
    table.add_row("mean held", _s(window.mean_held_s))
    table.add_row("server-side hold (draining start -> switching end)", _s(window.server_hold_s))
    table.add_row("longest gap between completions", _gap(window.longest_completion_gap))
    table.add_row("longest gap between first tokens", _gap(window.longest_first_token_gap))
    table.add_row("output tok/s through the swap", f"{result.metrics.output_tokens_per_s:,.1f}")
    return table


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


def _gap(gap: Gap | None) -> str:
    return "-" if gap is None else f"{gap.seconds:.2f} s (from {gap.from_s:.1f} s)"


def swap_json(result: SwapLoadResult, *, config: dict[str, Any]) -> dict[str, Any]:
    origin = min((r.start_s for r in result.load.records), default=0.0)
    operation = result.operation
    requests = [
        {
            "sent_s": r.start_s - origin,
            "first_token_s": r.chunk_times_s[0] - origin if r.chunk_times_s else None,
            "end_s": r.chunk_times_s[-1] - origin if r.chunk_times_s else None,
            "served_model": r.served_model,
            "output_tokens": r.output_tokens,
            "error": r.error,
        }
        for r in sorted(result.load.records, key=lambda r: r.start_s)
    ]
    return {
        "schema": JSON_SCHEMA,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": config,
        "load_started_unix_s": origin + result.load.wall_offset_s,
        "swap": None
        if operation is None
        else {
            **operation.model_dump(
                mode="json",
                include={
                    "op_id",
                    "outcome",
                    "message",
                    "phase_seconds",
                    "events",
                    "strategy",
                    "strategy_reason",
                },
            ),
            "alias_unavailable_s": operation.details.alias_unavailable_s,
            "startup_steps": operation.details.startup_steps,
        },
        "window": result.window.to_json(),
        "load": result.metrics.to_json(),
        "requests": requests,
    }
