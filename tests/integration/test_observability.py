"""Observability on the real stack: a miniature serves traffic, one swap moves `default` to a
second miniature, and a real Prometheus server (run by `switchyard metrics prometheus`,
scraping Ray's metrics agents through the service-discovery file) has data for every PromQL
expression of every dashboard panel and annotation; the swap's metrics name both models and
every phase; `switchyard status` reports tok/s and p95 TTFT per model.

The traffic and the swap are the story's (tests/support/story_swap.py, on the suite's real
stack: Kimi -> MiniMax under load), which Prometheus scraped from before the load began.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

from domain import promql
from domain.metric_names import (
    ENGINE_KV_USAGE,
    ENGINE_RUNNING,
    ENGINE_WAITING,
    GATEWAY_HELD,
    KV_PREDICTION_RATIO,
    LAST_SWAP_ALIAS_UNAVAILABLE_SECONDS,
    LAST_SWAP_PHASE_SECONDS,
    MODEL_STATE,
    SWAP_IN_PROGRESS,
)
from switchyard.commands.metrics import DEBIAN_PROMETHEUS
from switchyard.observability.dashboards import dashboards, every_expression
from tests.support.recording_http import Answer, recording_server
from tests.support.running_stack import SWITCHYARD, RunningStack, free_port, stack_env
from tests.support.shared_stacks import API_KEY, KIMI, MINIMAX
from tests.support.story_swap import StorySwap, prometheus_ready
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(
    not Path(DEBIAN_PROMETHEUS).is_file(),
    reason=f"no Prometheus server at {DEBIAN_PROMETHEUS} (`make setup` installs Debian's "
    "`prometheus` where apt is usable)",
)


@dataclass
class Observed:
    stack: RunningStack
    prometheus_url: str
    started_at: float
    swapped_at: float
    held_from: float
    swap_log: str


@pytest.fixture(scope="module")
def observed(story_swap: StorySwap) -> Observed:
    """The story's swap (Kimi -> MiniMax under load) as Prometheus recorded it."""
    assert story_swap.job.returncode == 0, story_swap.job.stdout + story_swap.job.stderr
    assert KIMI in story_swap.answered and MINIMAX in story_swap.answered, story_swap.answered
    return Observed(
        story_swap.stack,
        story_swap.prometheus_url,
        story_swap.started_at,
        story_swap.swapped_at,
        story_swap.held_from,
        story_swap.job.stdout + story_swap.job.stderr,
    )


def _query_range(url: str, expr: str, start: float, end: float) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode(
        {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": "5"}
    )
    with urllib.request.urlopen(f"{url}/api/v1/query_range?{params}", timeout=30) as reply:
        body = json.loads(reply.read())
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def test_metrics_prometheus_scrapes_what_the_sd_file_lists_until_sigterm(tmp_path: Path) -> None:
    """The command alone, against a stand-in metrics agent listed in an SD file."""

    def agent(method: str, path: str, body: bytes) -> Answer:
        return 200, "text/plain", "# TYPE ray_probe_total counter\nray_probe_total 7\n"

    with recording_server(agent) as target:
        sd_file = tmp_path / "sd.json"
        sd_file.write_text(json.dumps([{"targets": [target.url.removeprefix("http://")]}]))
        port = free_port()
        command = [SWITCHYARD, "metrics", "prometheus", "--port", str(port)]
        command += ["--sd-file", str(sd_file), "--state-dir", str(tmp_path)]
        command += ["--scrape-interval-s", "1"]
        server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until(lambda: prometheus_ready(url), 60, message="Prometheus did not start")
            assert (tmp_path / "prometheus" / "url").read_text().strip() == url
            wait_until(
                lambda: bool(_query_range(url, "ray_probe_total", time.time() - 60, time.time())),
                60,
                message="Prometheus scraped no ray_probe_total from the target",
            )
        finally:
            server.send_signal(signal.SIGTERM)
            assert server.wait(timeout=60) == 0
    assert not (tmp_path / "prometheus" / "url").exists()


def _panel_expr(expr: str) -> str:
    # An annotation's query keeps only its events (`> 0`); checked here for its series,
    # since a park or wake may fall before this window (the story's swap annotation is
    # checked for its event below).
    return expr.replace(promql.RATE_WINDOW, "1m").removesuffix(" > 0")


def test_prometheus_finds_every_node_agent_through_the_service_discovery_file(
    observed: Observed,
) -> None:
    with urllib.request.urlopen(f"{observed.prometheus_url}/api/v1/targets", timeout=30) as r:
        targets = json.loads(r.read())["data"]["activeTargets"]
    healthy = [t for t in targets if t["health"] == "up"]
    assert healthy, targets


def test_prometheus_loads_and_evaluates_every_alert_rule(observed: Observed) -> None:
    from switchyard.observability.alert_rules import alert_rules

    def loaded() -> list[dict[str, object]]:
        with urllib.request.urlopen(f"{observed.prometheus_url}/api/v1/rules", timeout=30) as r:
            groups = json.loads(r.read())["data"]["groups"]
        return [rule for group in groups for rule in group["rules"]]

    # Evaluated once at least (every scrape interval): health is "ok", not "unknown".
    wait_until(lambda: all(r.get("health") == "ok" for r in loaded()), 60)
    assert {r["name"] for r in loaded()} == {rule.name for rule in alert_rules()}


def test_every_dashboard_expression_returns_data(observed: Observed) -> None:
    empty = [
        expr
        for expr in every_expression()
        if not _query_range(
            observed.prometheus_url, _panel_expr(expr), observed.started_at, time.time()
        )
    ]
    if empty:
        names = _query_range(
            observed.prometheus_url,
            'count by (__name__) ({__name__=~"ray_(vllm|switchyard).*"})',
            observed.started_at,
            time.time(),
        )
        known = sorted(n["metric"]["__name__"] for n in names)
        pytest.fail(f"no data for {empty}; series present: {known}")


def test_the_swap_shows_both_models_and_every_phase_duration(observed: Observed) -> None:
    url, start, end = observed.prometheus_url, observed.started_at, time.time()
    phases = _query_range(url, LAST_SWAP_PHASE_SECONDS.exported, start, end)
    seen = {(s["metric"]["old"], s["metric"]["new"], s["metric"]["phase"]) for s in phases}
    for phase in ("preflight", "draining", "removing_old", "deploying_new", "switching"):
        assert (KIMI, MINIMAX, phase) in seen, seen
    deploy = next(s for s in phases if s["metric"]["phase"] == "deploying_new")
    assert float(deploy["values"][-1][1]) > 1.0, "starting an engine takes seconds"
    annotations = _query_range(url, f"{SWAP_IN_PROGRESS.exported} > 0", start, end)
    assert (KIMI, MINIMAX) in {(a["metric"]["old"], a["metric"]["new"]) for a in annotations}
    states = _query_range(url, f"{MODEL_STATE.exported} == 1", start, end)
    assert {KIMI, MINIMAX} <= {s["metric"]["model"] for s in states}


def test_the_story_swap_made_before_breaking_and_held_no_request(observed: Observed) -> None:
    # Kimi and MiniMax need one accelerator slot each and the head has four: NEW fits
    # beside OLD, so `auto` swaps make-before-break and no gateway ever holds a request.
    assert "strategy: make-before-break" in observed.swap_log, observed.swap_log
    url, start, end = observed.prometheus_url, observed.started_at, observed.held_from
    phases = _query_range(url, LAST_SWAP_PHASE_SECONDS.exported, start, end)
    story = [s for s in phases if (s["metric"]["old"], s["metric"]["new"]) == (KIMI, MINIMAX)]
    assert {s["metric"]["strategy"] for s in story} == {"make-before-break"}, phases
    held = _query_range(url, f"{GATEWAY_HELD.exported} > 0", start, end)
    assert held == [], held


def test_the_forced_break_before_make_swap_held_requests_and_says_how_long(
    observed: Observed,
) -> None:
    url, start, end = observed.prometheus_url, observed.held_from, time.time()
    unavailable = _query_range(url, LAST_SWAP_ALIAS_UNAVAILABLE_SECONDS.exported, start, end)
    small = [s for s in unavailable if s["metric"]["alias"] == "small"]
    assert small and small[0]["metric"]["strategy"] == "break-before-make", unavailable
    assert float(small[0]["values"][-1][1]) > 1.0, small
    mbb = [s for s in unavailable if s["metric"]["alias"] == "default"]
    assert all(float(v[1]) == 0.0 for s in mbb for v in s["values"]), mbb


def _query_now(url: str, expr: str) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{url}/api/v1/query?{params}", timeout=30) as reply:
        body = json.loads(reply.read())
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def test_after_the_swap_every_engine_panel_has_data_for_new_and_none_shows_old_live(
    observed: Observed,
) -> None:
    # vLLM sets its scheduler gauges only while a request is in flight and Ray forgets a
    # gauge not refreshed for two export intervals: without the replica's idle gauges
    # (serve_apps/engine/idle_gauges.py) NEW had none once the swap's load ended.
    url = observed.prometheus_url
    engine = next(d for d in dashboards() if d.uid == "switchyard-engine")
    for panel in engine.panels:
        for target in panel.targets:
            series = _query_range(url, _panel_expr(target.expr), observed.swapped_at, time.time())
            models = {s["metric"].get("model_name") for s in series}
            assert MINIMAX in models, (panel.title, target.expr, series)
    # Long after the load ended (the fixture waited), NEW's gauges are still exported and
    # the removed model's are gone: no panel shows Kimi as a live engine.
    for spec in (ENGINE_RUNNING, ENGINE_WAITING, ENGINE_KV_USAGE):
        live = {s["metric"]["model_name"] for s in _query_now(url, spec.exported)}
        assert MINIMAX in live and KIMI not in live, (spec.exported, live)


def test_status_reports_throughput_latency_and_capacity_per_model(observed: Observed) -> None:
    # The swap's load may have ended more than the 2-minute rate window ago on a slow
    # machine: a few fresh requests give the window something to report.
    client = openai.OpenAI(
        base_url=observed.stack.base_url, api_key=API_KEY, max_retries=0, timeout=120
    )
    for _ in range(4):
        # Streamed: the gateway records time to first token for streams only.
        stream = client.completions.create(
            model="default", prompt="status", max_tokens=4, stream=True
        )
        assert [chunk for chunk in stream if chunk.choices]

    seen: dict[str, Any] = {}

    def reported() -> bool:
        result = subprocess.run(
            [
                SWITCHYARD,
                "status",
                "--json",
                "--state-dir",
                str(observed.stack.state_dir),
                "--prometheus",
                observed.prometheus_url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=stack_env(observed.stack.state_dir),
            check=True,
        )
        status: dict[str, Any] = json.loads(result.stdout)
        by_model = {m["model"]: m for m in status["metrics"]["models"]}
        seen.update(status)
        return by_model.get(MINIMAX, {}).get("ttft_p95_s") is not None

    wait_until(reported, 60, 2, message="no p95 TTFT for MiniMax in status")
    status = seen
    assert status["metrics"]["source"] == observed.prometheus_url
    assert status["metrics"]["prometheus_service_discovery_file"].endswith(
        "prom_metrics_service_discovery.json"
    )
    (minimax,) = [m for m in status["models"] if m["name"] == MINIMAX]
    assert minimax["generated_tok_s"] is not None
    by_model = {m["model"]: m for m in status["metrics"]["models"]}
    assert by_model[MINIMAX]["ttft_p95_s"] > 0
    # What the engine logged at start-up beside admission's prediction. vLLM's CPU engine
    # is given its KV space outright (VLLM_CPU_KVCACHE_SPACE), so the only term in play is
    # the config's bytes per token: logged and predicted tokens are equal.
    capacity = minimax["capacity"]
    assert set(capacity) == {"predicted", "observed"}
    for side in capacity.values():
        assert {"weights_gib", "kv_cache_gib", "kv_cache_tokens"} <= set(side)
    assert capacity["observed"]["weights_gib"] is None, "vLLM's CPU worker logs no weights"
    assert capacity["observed"]["kv_cache_gib"] == capacity["predicted"]["kv_cache_gib"] == 1.0
    assert capacity["observed"]["kv_cache_tokens"] == capacity["predicted"]["kv_cache_tokens"] > 0
    # The manager samples the gauge on its own period and Prometheus scrapes on another, so
    # the series appears some seconds after the capacity is recorded.
    ratios: dict[str, float] = {}

    def ratio_scraped() -> bool:
        series = _query_now(observed.prometheus_url, KV_PREDICTION_RATIO.exported)
        ratios.update({s["metric"]["model"]: float(s["value"][1]) for s in series})
        return MINIMAX in ratios

    wait_until(ratio_scraped, 60, 2, message="no KV prediction ratio for MiniMax in Prometheus")
    assert ratios[MINIMAX] == 1.0, ratios
