"""Per-level metrics with `vllm bench serve`'s definitions (vllm/benchmarks/serve.py,
`calculate_metrics`): throughputs divide by the level's wall-clock duration; TTFT, TPOT and
E2EL have one sample per successful request, ITL one per inter-chunk gap; percentiles
interpolate linearly between samples (numpy's default); failed requests add to `failed`
and to no distribution.

One difference: a distribution with no samples is None here (vLLM reports 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from switchyard.bench.request_record import RequestRecord

REPORTED_PERCENTILES: tuple[int, ...] = (50, 90, 99)
MAX_ERROR_SAMPLES = 5


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile with linear interpolation (numpy.percentile's default method)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile p must be within 0..100, got {p}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class Distribution:
    """Summary of one latency metric, in milliseconds."""

    count: int
    mean_ms: float
    std_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float

    @classmethod
    def of_seconds(cls, samples_s: Sequence[float]) -> Distribution | None:
        if not samples_s:
            return None
        ms = [s * 1000 for s in samples_s]
        mean = sum(ms) / len(ms)
        # Population standard deviation, as numpy.std computes it.
        std = math.sqrt(sum((x - mean) ** 2 for x in ms) / len(ms))
        p50, p90, p99 = (percentile(ms, p) for p in REPORTED_PERCENTILES)
        return cls(len(ms), mean, std, p50, p90, p99)


@dataclass(frozen=True)
class LevelMetrics:
    """What one load level (a concurrency, a request rate) measured."""

    concurrency: int
    request_rate_per_s: float | None
    """None: every request is released at once and only `concurrency` limits them."""
    num_prompts: int
    completed: int
    failed: int
    duration_s: float
    total_input_tokens: int
    total_output_tokens: int
    request_throughput_per_s: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    ttft: Distribution | None
    tpot: Distribution | None
    itl: Distribution | None
    e2el: Distribution | None
    errors: tuple[str, ...]
    """Up to MAX_ERROR_SAMPLES distinct error lines."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LevelMetrics:
        """Read back `to_json`'s output (extra keys, such as per-request rows, are ignored)."""
        known = {name: data[name] for name in cls.__dataclass_fields__}
        for name in _DISTRIBUTIONS:
            if known[name] is not None:
                known[name] = Distribution(**known[name])
        known["errors"] = tuple(known["errors"])
        return cls(**known)


_DISTRIBUTIONS = ("ttft", "tpot", "itl", "e2el")


def summarize(
    records: Sequence[RequestRecord],
    *,
    duration_s: float,
    concurrency: int,
    request_rate_per_s: float | None,
    prompt_tokens: Sequence[int],
) -> LevelMetrics:
    """Metrics of one level. `prompt_tokens[i]` is the client's count for request i; the
    server's `usage.prompt_tokens` replaces it where the server reported one (as vLLM does)."""
    if duration_s <= 0:
        raise ValueError(f"duration_s must be positive, got {duration_s}")
    if len(prompt_tokens) != len(records):
        raise ValueError("one prompt length per record is needed")
    ok = [(r, p) for r, p in zip(records, prompt_tokens, strict=True) if r.succeeded]
    total_input = sum(r.prompt_tokens if r.prompt_tokens is not None else p for r, p in ok)
    total_output = sum(r.output_tokens for r, _ in ok)
    errors: list[str] = []
    for record in records:
        if record.succeeded or record.error is None or record.error in errors:
            continue
        if len(errors) < MAX_ERROR_SAMPLES:
            errors.append(record.error)
    successful = [r for r, _ in ok]
    return LevelMetrics(
        concurrency=concurrency,
        request_rate_per_s=request_rate_per_s,
        num_prompts=len(records),
        completed=len(successful),
        failed=len(records) - len(successful),
        duration_s=duration_s,
        total_input_tokens=total_input,
        total_output_tokens=total_output,
        request_throughput_per_s=len(successful) / duration_s,
        output_tokens_per_s=total_output / duration_s,
        total_tokens_per_s=(total_input + total_output) / duration_s,
        ttft=Distribution.of_seconds([r.ttft_s for r in successful if r.ttft_s is not None]),
        tpot=Distribution.of_seconds([r.tpot_s for r in successful if r.tpot_s is not None]),
        itl=Distribution.of_seconds([gap for r in successful for gap in r.itls_s]),
        e2el=Distribution.of_seconds([r.e2el_s for r in successful if r.e2el_s is not None]),
        errors=tuple(errors),
    )
