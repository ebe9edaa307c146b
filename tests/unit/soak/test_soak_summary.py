"""The soak suite's report (benchmarks/soak.py): percentiles, error counting, memory growth (no
stack)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.soak import Sample, Soak, SoakConfig, _error_of, percentile, summary


def _soak(samples: list[Any]) -> Any:
    config = SoakConfig(url="http://127.0.0.1:1/v1", state_dir=Path("/nonexistent"))
    soak = Soak(config, samples=samples)
    soak.memory_start = {"gateway_rss_mib": 100.0, "manager_rss_mib": 50.0}
    soak.memory_end = {"gateway_rss_mib": 112.5, "manager_rss_mib": 50.0}
    return soak


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.99) == 99.0
    assert percentile(values, 0.50) == 50.0
    assert percentile([3.0], 0.99) == 3.0
    assert percentile([], 0.99) is None


def test_summary_counts_errors_by_kind_and_latency_of_successes_only() -> None:
    samples = [Sample(float(i), 1.0, True, None, "kimi") for i in range(99)]
    samples.append(Sample(99.0, 30.0, False, "HTTP 503: busy", None))
    report = summary(_soak(samples))
    assert report["requests"] == 100
    assert report["errors"] == 1
    assert report["error_kinds"] == {"HTTP 503: busy": 1}
    assert report["latency_s"]["p99"] == 1.0, "a failed request's time is not a latency"
    assert report["answered_by"] == {"kimi": 99}
    assert report["memory_mib"]["growth"] == {"gateway_rss_mib": 12.5, "manager_rss_mib": 0.0}


def test_a_stream_that_ends_with_an_error_event_is_an_error() -> None:
    ok = 'data: {"model": "kimi", "choices": []}\n\ndata: [DONE]\n\n'
    broken = 'data: {"model": "kimi"}\n\ndata: {"error": {"message": "engine died"}}\n\n'
    assert _error_of(ok, sse=True) == (None, "kimi")
    error, _ = _error_of(broken, sse=True)
    assert error is not None and "engine died" in error
    assert _error_of('{"model": "llama"}', sse=False) == (None, "llama")
