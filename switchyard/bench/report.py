"""The sweep's results as a rich table (for people) and a JSON document (for scripts)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.table import Table

from switchyard.bench.level_metrics import Distribution, LevelMetrics
from switchyard.bench.request_record import RequestRecord
from switchyard.bench.sweep import LevelResult

JSON_SCHEMA = "switchyard-bench/1"


def results_table(levels: Sequence[LevelMetrics], title: str) -> Table:
    table = Table(title=title)
    for column in ("concurrency", "ok/failed", "req/s", "out tok/s", "total tok/s"):
        table.add_column(column, justify="right")
    for metric in ("TTFT", "TPOT", "ITL", "E2E"):
        table.add_column(f"{metric} ms\nmean p50 p90 p99", justify="right")
    for m in levels:
        table.add_row(
            str(m.concurrency),
            f"{m.completed}/{m.failed}" if not m.failed else f"{m.completed}/[red]{m.failed}[/red]",
            f"{m.request_throughput_per_s:,.2f}",
            f"{m.output_tokens_per_s:,.1f}",
            f"{m.total_tokens_per_s:,.1f}",
            *(_cell(d) for d in (m.ttft, m.tpot, m.itl, m.e2el)),
        )
    return table


def _cell(d: Distribution | None) -> str:
    if d is None:
        return "-"
    return " ".join(_ms(v) for v in (d.mean_ms, d.p50_ms, d.p90_ms, d.p99_ms))


def _ms(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def request_json(record: RequestRecord, client_prompt_tokens: int) -> dict[str, Any]:
    ttft, e2el, tpot = record.ttft_s, record.e2el_s, record.tpot_s
    return {
        "prompt_tokens": record.prompt_tokens
        if record.prompt_tokens is not None
        else client_prompt_tokens,
        "output_tokens": record.output_tokens,
        "chunks": len(record.chunk_times_s),
        "ttft_ms": None if ttft is None else ttft * 1000,
        "tpot_ms": None if tpot is None else tpot * 1000,
        "e2el_ms": None if e2el is None else e2el * 1000,
        "error": record.error,
    }


def sweep_json(
    results: Sequence[LevelResult], *, config: dict[str, Any], prompt_tokens: Sequence[int]
) -> dict[str, Any]:
    levels = []
    for result in results:
        level = result.metrics.to_json()
        level["requests"] = [
            request_json(r, n) for r, n in zip(result.run.records, prompt_tokens, strict=True)
        ]
        levels.append(level)
    return {
        "schema": JSON_SCHEMA,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": config,
        "levels": levels,
    }


def write_json(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
