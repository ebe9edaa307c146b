"""PromQL built from metric specs, so an expression can only name a metric that exists.

Grafana replaces `$__rate_interval` (at least four scrape intervals) and `$__range` when a
panel runs; `RATE_WINDOW` is what a panel asks for.
"""

from __future__ import annotations

from domain.metric_names import Kind, MetricSpec

RATE_WINDOW = "$__rate_interval"


def _by(labels: tuple[str, ...]) -> str:
    for label in labels:
        assert label, "empty label"
    return f"by ({', '.join(labels)}) " if labels else ""


def _selector(name: str, matchers: str) -> str:
    return f"{name}{{{matchers}}}" if matchers else name


def current(spec: MetricSpec, by: tuple[str, ...], *, agg: str = "sum", matchers: str = "") -> str:
    """A gauge (or a counter's running total) aggregated over replicas and nodes."""
    _check_labels(spec, by)
    return f"{agg} {_by(by)}({_selector(spec.exported, matchers)})"


def rate(spec: MetricSpec, by: tuple[str, ...], *, matchers: str = "") -> str:
    """Per-second rate of a counter, summed over replicas and nodes."""
    assert spec.kind is Kind.COUNTER, spec.name
    _check_labels(spec, by)
    return f"sum {_by(by)}(rate({_selector(spec.exported, matchers)}[{RATE_WINDOW}]))"


def changed(spec: MetricSpec, by: tuple[str, ...], *, window: str = "1m") -> str:
    """Whether a counter grew in the last `window`: an annotation's query."""
    assert spec.kind is Kind.COUNTER, spec.name
    _check_labels(spec, by)
    return f"sum {_by(by)}(increase({spec.exported}[{window}])) > 0"


def quantile(q: float, spec: MetricSpec, by: tuple[str, ...], *, matchers: str = "") -> str:
    """A histogram's quantile over the rate window, from all replicas' buckets together."""
    assert 0 < q < 1
    _check_labels(spec, by)
    series = _selector(spec.series("_bucket"), matchers)
    return f"histogram_quantile({q:g}, sum {_by(('le', *by))}(rate({series}[{RATE_WINDOW}])))"


def observations(spec: MetricSpec, by: tuple[str, ...], *, matchers: str = "") -> str:
    """How many values a histogram has seen so far."""
    _check_labels(spec, by)
    return f"sum {_by(by)}({_selector(spec.series('_count'), matchers)})"


def mean(spec: MetricSpec, by: tuple[str, ...], *, matchers: str = "") -> str:
    """A histogram's mean over everything it has seen (sum over count)."""
    _check_labels(spec, by)
    return ratio(
        f"sum {_by(by)}({_selector(spec.series('_sum'), matchers)})",
        f"sum {_by(by)}({_selector(spec.series('_count'), matchers)})",
    )


def or_zero(expr: str, like: str) -> str:
    """`expr`, or 0 for every series of `like` that `expr` lacks: Ray exports a counter only
    once it has been incremented, so "never happened" reads as missing, not as 0."""
    return f"({expr} or ({like}) * 0)"


def ratio(numerator: str, denominator: str) -> str:
    return f"({numerator}) / ({denominator})"


def _check_labels(spec: MetricSpec, by: tuple[str, ...]) -> None:
    unknown = set(by) - set(spec.labels)
    assert not unknown, f"{spec.name} has no label(s) {sorted(unknown)}"
