"""benchmarks/soak.py's report: percentiles, error counting, memory growth (no stack)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

# benchmarks/ holds scripts, not a package (mypy maps each file as a top-level module), so the
# script is loaded from its path.
_SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "soak.py"
_spec = importlib.util.spec_from_file_location("soak_script", _SCRIPT)
assert _spec is not None and _spec.loader is not None
soak_script: Any = importlib.util.module_from_spec(_spec)
sys.modules["soak_script"] = soak_script  # dataclasses resolve their module by name
_spec.loader.exec_module(soak_script)
Sample, Soak, SoakConfig = soak_script.Sample, soak_script.Soak, soak_script.SoakConfig
_error_of, percentile, summary = soak_script._error_of, soak_script.percentile, soak_script.summary


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
