"""tok/s and p95 TTFT per model from Ray's metrics agents (two scrapes) or from Prometheus:
parsed once from Prometheus text, summed over replicas and nodes, deltas over the window."""

from __future__ import annotations

import json
import math
import urllib.parse
from pathlib import Path

import pytest

from cluster.telemetry.live_stats import (
    between,
    bucket_quantile,
    our_lines,
    parse_exposition,
    query_prometheus,
    scrape_agents,
)
from cluster.telemetry.metrics_targets import scrape_targets, service_discovery_file
from domain.exit_codes import UserInputError
from switchyard.observability.status_metrics import live_metrics
from tests.support.recording_http import Answer, recording_server

RAY_LABELS = 'Component="core_worker",NodeAddress="10.0.0.1",SessionName="s",WorkerId="{w}"'


def agent_text(worker: str, generated: float, ttft_counts: dict[str, float]) -> str:
    """What a Ray metrics agent serves for one gateway replica (names and labels as Ray
    2.60 exports them)."""
    labels = RAY_LABELS.format(w=worker)
    lines = [
        "# HELP ray_switchyard_gateway_generated_tokens_total Generated tokens.",
        "# TYPE ray_switchyard_gateway_generated_tokens_total counter",
        f'ray_switchyard_gateway_generated_tokens_total{{{labels},model="m"}} {generated}',
        "# HELP ray_switchyard_gateway_time_to_first_token_seconds TTFT.",
        "# TYPE ray_switchyard_gateway_time_to_first_token_seconds histogram",
    ]
    for le, count in ttft_counts.items():
        lines.append(
            "ray_switchyard_gateway_time_to_first_token_seconds_bucket"
            f'{{{labels},le="{le}",model="m"}} {count}'
        )
    total = max(ttft_counts.values())
    lines += [
        f'ray_switchyard_gateway_time_to_first_token_seconds_count{{{labels},model="m"}} {total}',
        f'ray_switchyard_gateway_time_to_first_token_seconds_sum{{{labels},model="m"}} 1.0',
        "# HELP ray_other_metric Not ours.",
        "# TYPE ray_other_metric gauge",
        f"ray_other_metric{{{labels}}} 3.0",
    ]
    return "\n".join(lines) + "\n"


def test_replicas_add_up_and_rates_come_from_the_window() -> None:
    before = parse_exposition(
        [agent_text("w1", 100, {"0.1": 0, "1.0": 0, "+Inf": 0}), agent_text("w2", 50, {"+Inf": 0})],
        at=0.0,
    )
    after = parse_exposition(
        [
            agent_text("w1", 300, {"0.1": 90, "1.0": 100, "+Inf": 100}),
            agent_text("w2", 150, {"0.1": 0, "1.0": 0, "+Inf": 0}),
        ],
        at=10.0,
    )
    (stats,) = between(before, after)
    assert stats.model == "m"
    assert stats.generated_tok_s == pytest.approx(30.0)  # (300 + 150 - 150) / 10 s
    # 95th of 100: rank 95 lies in (0.1, 1.0], 5 of its 10 observations in.
    assert stats.ttft_p95_s == pytest.approx(0.1 + 0.9 * 0.5)


def test_only_our_families_reach_the_parser() -> None:
    text = agent_text("w1", 100, {"+Inf": 4})
    kept = our_lines(text).splitlines()
    assert "ray_other_metric" not in "".join(kept)
    assert kept[0] == "# HELP ray_switchyard_gateway_generated_tokens_total Generated tokens."
    assert len(kept) == len(text.splitlines()) - 3, "only the other family's three lines go"
    assert our_lines("# HELP ray_other Not ours.\nray_other 1\n") == ""


def test_a_family_that_only_shares_our_prefix_is_not_counted() -> None:
    labels = RAY_LABELS.format(w="w1")
    look_alike = (
        "# TYPE ray_switchyard_gateway_requests_held gauge\n"
        f'ray_switchyard_gateway_requests_held{{{labels},model="m"}} 7.0\n'
    )
    scrape = parse_exposition([agent_text("w1", 100, {"+Inf": 4}) + look_alike], at=0.0)
    assert dict(scrape.requests) == {}
    assert dict(scrape.generated) == {"m": 100.0}


def test_a_restarted_replica_never_gives_a_negative_rate() -> None:
    before = parse_exposition([agent_text("w1", 500, {"+Inf": 5})], at=0.0)
    after = parse_exposition([agent_text("w1", 20, {"+Inf": 5})], at=10.0)
    (stats,) = between(before, after)
    assert stats.generated_tok_s == 0.0
    assert stats.ttft_p95_s is None, "no first token in the window"


@pytest.mark.parametrize(
    ("buckets", "expected"),
    [
        ({0.5: 10.0, 1.0: 10.0, math.inf: 10.0}, 0.475),
        ({0.5: 0.0, 1.0: 0.0, math.inf: 4.0}, 1.0),  # beyond the last bound: that bound
        ({0.5: 0.0, math.inf: 0.0}, None),
    ],
)
def test_bucket_quantile_matches_prometheus_histogram_quantile(
    buckets: dict[float, float], expected: float | None
) -> None:
    result = bucket_quantile(0.95, buckets)
    assert result == (pytest.approx(expected) if expected is not None else None)


def test_agents_are_scraped_over_http_and_a_dead_one_is_skipped() -> None:
    def agent(method: str, path: str, body: bytes) -> Answer:
        return 200, "text/plain; version=0.0.4", agent_text("w1", 42, {"+Inf": 1})

    with recording_server(agent) as server:
        live = server.url.removeprefix("http://")
        scrape = scrape_agents([live, "127.0.0.1:1"], timeout_s=2)
    assert scrape.generated == {"m": 42}


def test_status_reads_the_service_discovery_file_of_the_head_up_started(tmp_path: Path) -> None:
    session = tmp_path / "session_x"
    session.mkdir()
    (tmp_path / "local_head.json").write_text(json.dumps({"session_dir": str(session)}))
    sd = service_discovery_file(tmp_path)
    assert sd == session / "prom_metrics_service_discovery.json"
    sd.write_text(json.dumps([{"labels": {"job": "ray"}, "targets": ["a:1", "b:2"]}]))
    assert scrape_targets(sd) == ["a:1", "b:2"]


def test_status_samples_the_agents_when_no_prometheus_is_known(tmp_path: Path) -> None:
    def agent(method: str, path: str, body: bytes) -> Answer:
        return 200, "text/plain", agent_text("w1", 42, {"+Inf": 1})

    with recording_server(agent) as server:
        session = tmp_path / "session"
        session.mkdir()
        (tmp_path / "local_head.json").write_text(json.dumps({"session_dir": str(session)}))
        (session / "prom_metrics_service_discovery.json").write_text(
            json.dumps([{"targets": [server.url.removeprefix("http://")]}])
        )
        report = live_metrics(tmp_path, None, window_s=0.05)
    assert report.source == "ray-metrics-agents"
    assert [m.model_dump() for m in report.models] == [
        {
            "model": "m",
            "generated_tok_s": 0.0,
            "prompt_tok_s": 0.0,
            "requests_s": 0.0,
            "ttft_p95_s": None,
        }
    ]


def test_status_asks_prometheus_with_the_dashboards_own_expressions() -> None:
    def prometheus(method: str, path: str, body: bytes) -> Answer:
        query = urllib.parse.parse_qs(urllib.parse.urlparse(path).query)["query"][0]
        value = "0.25" if "histogram_quantile" in query else "12.5"
        result = [{"metric": {"model": "m"}, "value": [0, value]}]
        return (
            200,
            "application/json",
            json.dumps({"status": "success", "data": {"result": result}}),
        )

    with recording_server(prometheus) as server:
        (stats,) = query_prometheus(server.url)
    assert (stats.model, stats.generated_tok_s, stats.ttft_p95_s) == ("m", 12.5, 0.25)
    queries = [urllib.parse.unquote_plus(r.path) for r in server.requests]
    assert any("ray_switchyard_gateway_generated_tokens_total[2m]" in q for q in queries)


def test_an_unreachable_prometheus_given_explicitly_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="--prometheus: cannot query"):
        live_metrics(tmp_path, "http://127.0.0.1:1", window_s=0)


def test_a_recorded_prometheus_that_stopped_falls_back_to_nothing_without_agents(
    tmp_path: Path,
) -> None:
    (tmp_path / "prometheus").mkdir()
    (tmp_path / "prometheus" / "url").write_text("http://127.0.0.1:1\n")
    report = live_metrics(tmp_path, None, window_s=0)
    assert (report.source, report.models) == (None, [])
