"""The `metrics` part of `switchyard status`: where metrics are and what they say now."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cluster.telemetry.live_stats import ModelLiveStats, query_prometheus, sample_agents
from cluster.telemetry.metrics_targets import scrape_targets, service_discovery_file
from domain.exit_codes import UserInputError
from domain.status_report import MetricsStatus, ModelLive

PROMETHEUS_URL_FILE = "prometheus/url"
"""Written by `switchyard metrics prometheus` while it runs, so `status` can ask it."""


def recorded_prometheus(state_dir: Path) -> str | None:
    path = state_dir / PROMETHEUS_URL_FILE
    return path.read_text().strip() or None if path.exists() else None


def live_metrics(
    state_dir: Path,
    prometheus_url: str | None,
    window_s: float,
    manager_samples: Callable[[], MetricsStatus | None] = lambda: None,
) -> MetricsStatus:
    """Per-model tok/s and p95 TTFT, from the first source that answers: a Prometheus given
    or recorded, the manager's own samples, or (`window_s` > 0) two scrapes of the metrics
    agents `window_s` apart. Nothing waits unless `window_s` asks for it."""
    sd_file = service_discovery_file(state_dir)
    source: str | None = None
    window: float | None = None
    stats: list[ModelLiveStats] | None = None
    for url in (prometheus_url, recorded_prometheus(state_dir)):
        if url is None:
            continue
        try:
            stats = query_prometheus(url)
        except (OSError, ValueError) as exc:
            if url == prometheus_url:
                raise UserInputError(f"--prometheus: cannot query {url}: {exc}") from None
            continue  # a recorded server that has stopped: fall back to the agents
        source = url
        break
    if stats is None and window_s == 0:
        sampled = manager_samples()
        if sampled is not None:
            return sampled
    if stats is None and window_s > 0 and sd_file.exists():
        stats = sample_agents(scrape_targets(sd_file), window_s)
        source, window = "ray-metrics-agents", window_s
    return MetricsStatus(
        prometheus_service_discovery_file=str(sd_file),
        source=source,
        window_s=window,
        models=[ModelLive.model_validate(s.to_json()) for s in stats or []],
    )
