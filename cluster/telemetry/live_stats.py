"""Current tokens/s and p95 TTFT per model, for `switchyard status`.

From the same metrics the dashboards chart: two scrapes of every node's Ray metrics agent a
window apart (counter and histogram-bucket deltas), or one query to a Prometheus server.
Prometheus text is parsed once, here at the edge, into typed samples.
"""

from __future__ import annotations

import json
import math
import time
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from domain import promql
from domain.metric_names import (
    GATEWAY_GENERATED_TOKENS,
    GATEWAY_PROMPT_TOKENS,
    GATEWAY_REQUESTS,
    GATEWAY_TTFT,
    RAY_PREFIX,
)

QUANTILE = 0.95


@dataclass(frozen=True)
class ModelLiveStats:
    model: str
    generated_tok_s: float
    prompt_tok_s: float
    requests_s: float
    ttft_p95_s: float | None
    """None when no streamed request got its first token in the window."""

    def to_json(self) -> dict[str, float | str | None]:
        return {
            "model": self.model,
            "generated_tok_s": round(self.generated_tok_s, 3),
            "prompt_tok_s": round(self.prompt_tok_s, 3),
            "requests_s": round(self.requests_s, 3),
            "ttft_p95_s": None if self.ttft_p95_s is None else round(self.ttft_p95_s, 4),
        }


@dataclass
class Scrape:
    """Totals over every scraped agent at one moment (per model)."""

    at: float
    generated: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    prompt: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    requests: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    ttft_buckets: dict[str, dict[float, float]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(float))
    )


_FAMILIES = tuple(
    RAY_PREFIX + spec.name
    for spec in (GATEWAY_GENERATED_TOKENS, GATEWAY_PROMPT_TOKENS, GATEWAY_REQUESTS, GATEWAY_TTFT)
)
"""The start of every line `parse_exposition` reads (samples, and the families' # HELP and
# TYPE lines)."""


def our_lines(text: str) -> str:
    """Only the lines of the families read here. A head's metrics agent serves every Ray,
    Serve and vLLM series (700 KB in 2,000 lines on a one-model head) and prometheus_client's
    parser, pure Python, took 0.12 s over all of it (2 ms over these lines): at one sample
    every 10 s, a third of what the idle fleet manager spent. A line's prefix is enough to
    tell; a family that merely shares a prefix is parsed, then ignored by its sample names."""
    kept = [
        line
        for line in text.splitlines()
        if line.startswith(_FAMILIES) or (line.startswith("# ") and line[7:].startswith(_FAMILIES))
    ]
    return "\n".join(kept) + "\n" if kept else ""


def parse_exposition(texts: Iterable[str], at: float) -> Scrape:
    """Sum our gateway series over every agent's Prometheus text (replicas and nodes add up)."""
    from prometheus_client.parser import text_string_to_metric_families

    scrape = Scrape(at=at)
    counters = {
        GATEWAY_GENERATED_TOKENS.exported: scrape.generated,
        GATEWAY_PROMPT_TOKENS.exported: scrape.prompt,
        GATEWAY_REQUESTS.exported: scrape.requests,
    }
    bucket = GATEWAY_TTFT.series("_bucket")
    for text in texts:
        for family in text_string_to_metric_families(our_lines(text)):
            for sample in family.samples:
                model = sample.labels.get("model")
                if model is None:
                    continue
                if sample.name in counters:
                    counters[sample.name][model] += sample.value
                elif sample.name == bucket:
                    upper = float(sample.labels["le"])
                    scrape.ttft_buckets[model][upper] += sample.value
    return scrape


def bucket_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """Prometheus' histogram_quantile over cumulative bucket counts (linear within a bucket)."""
    ordered = sorted(buckets.items())
    if not ordered or ordered[-1][1] <= 0:
        return None
    rank = q * ordered[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in ordered:
        if count >= rank:
            if math.isinf(upper):
                return lower  # the last finite bound, as Prometheus answers
            if count == below:
                return upper
            return lower + (upper - lower) * (rank - below) / (count - below)
        lower, below = upper, count
    return lower


def between(first: Scrape, second: Scrape) -> list[ModelLiveStats]:
    seconds = max(second.at - first.at, 1e-9)
    models = sorted(set(second.generated) | set(second.requests) | set(second.ttft_buckets))
    stats = []

    def per_s(model: str, series: Mapping[str, float], earlier: Mapping[str, float]) -> float:
        # A restarted replica resets its counters: never report a negative rate.
        return max(series.get(model, 0.0) - earlier.get(model, 0.0), 0.0) / seconds

    for model in models:
        before = first.ttft_buckets.get(model, {})
        delta = {
            le: count - before.get(le, 0.0)
            for le, count in second.ttft_buckets.get(model, {}).items()
        }
        stats.append(
            ModelLiveStats(
                model=model,
                generated_tok_s=per_s(model, second.generated, first.generated),
                prompt_tok_s=per_s(model, second.prompt, first.prompt),
                requests_s=per_s(model, second.requests, first.requests),
                ttft_p95_s=bucket_quantile(QUANTILE, delta),
            )
        )
    return stats


def _fetch(url: str, timeout_s: float) -> str:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        text: str = response.read().decode()
        return text


def scrape_agents(targets: Iterable[str], timeout_s: float = 5.0) -> Scrape:
    texts = []
    for target in targets:
        try:
            texts.append(_fetch(f"http://{target}/metrics", timeout_s))
        except OSError:
            continue  # a node that just left; the others still count
    return parse_exposition(texts, time.monotonic())


def sample_agents(targets: list[str], window_s: float) -> list[ModelLiveStats]:
    first = scrape_agents(targets)
    time.sleep(window_s)
    return between(first, scrape_agents(targets))


def query_prometheus(url: str, window: str = "2m", timeout_s: float = 5.0) -> list[ModelLiveStats]:
    """The same figures from a Prometheus server's HTTP API (rates over `window`)."""

    def query(expr: str) -> dict[str, float]:
        expr = expr.replace(promql.RATE_WINDOW, window)
        address = f"{url.rstrip('/')}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        reply = json.loads(_fetch(address, timeout_s))
        values: dict[str, float] = {}
        for item in reply.get("data", {}).get("result", []):
            value = float(item["value"][1])
            if not math.isnan(value):
                values[item["metric"].get("model", "")] = value
        return values

    generated = query(promql.rate(GATEWAY_GENERATED_TOKENS, ("model",)))
    prompt = query(promql.rate(GATEWAY_PROMPT_TOKENS, ("model",)))
    requests = query(promql.rate(GATEWAY_REQUESTS, ("model",)))
    ttft = query(promql.quantile(QUANTILE, GATEWAY_TTFT, ("model",)))
    return [
        ModelLiveStats(
            model=model,
            generated_tok_s=generated.get(model, 0.0),
            prompt_tok_s=prompt.get(model, 0.0),
            requests_s=requests.get(model, 0.0),
            ttft_p95_s=ttft.get(model),
        )
        for model in sorted(set(generated) | set(requests) | set(ttft))
    ]
