"""The JSON record and the plot a sweep writes."""

from __future__ import annotations

from pathlib import Path

from switchyard.bench.level_metrics import summarize
from switchyard.bench.load import LevelRun
from switchyard.bench.plot import plot_series
from switchyard.bench.report import results_table, sweep_json
from switchyard.bench.request_record import RequestRecord, failed_record
from switchyard.bench.sweep import LevelResult

RECORDS = (
    RequestRecord(
        start_s=1.0, chunk_times_s=(1.1, 1.2, 1.3), prompt_tokens=16, completion_tokens=3
    ),
    failed_record(1.0, "HTTP 503: busy"),
)


def _result(concurrency: int) -> LevelResult:
    metrics = summarize(
        RECORDS,
        duration_s=1.0,
        concurrency=concurrency,
        request_rate_per_s=None,
        prompt_tokens=[16, 16],
    )
    return LevelResult(metrics, LevelRun(RECORDS, 1.0, 0.0))


def test_the_json_has_one_row_per_request_with_its_lengths_and_latencies() -> None:
    document = sweep_json([_result(1), _result(4)], config={"model": "m"}, prompt_tokens=[16, 16])
    assert [level["concurrency"] for level in document["levels"]] == [1, 4]
    ok, failed = document["levels"][0]["requests"]
    assert (ok["prompt_tokens"], ok["output_tokens"], ok["error"]) == (16, 3, None)
    assert abs(ok["ttft_ms"] - 100) < 1e-6 and abs(ok["e2el_ms"] - 300) < 1e-6
    assert (failed["output_tokens"], failed["ttft_ms"], failed["error"]) == (
        0,
        None,
        "HTTP 503: busy",
    )


def test_the_table_has_a_row_per_level() -> None:
    table = results_table([_result(1).metrics, _result(4).metrics], "t")
    assert table.row_count == 2


def test_the_plot_is_written_as_a_png(tmp_path: Path) -> None:
    out = tmp_path / "plots" / "sweep.png"
    plot_series(out, {"a": [_result(1).metrics, _result(4).metrics]}, title="t")
    assert out.read_bytes()[:4] == b"\x89PNG"
