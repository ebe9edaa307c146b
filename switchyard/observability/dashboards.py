"""Grafana dashboards as data, and every generated file under `dashboards/`.

Every expression comes from `promql` over `metric_names`, so the committed files in
`dashboards/` are regenerated (`switchyard dashboards build`) whenever a metric changes,
and a unit test fails if they differ from what this module generates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from domain import metric_names as m
from domain import promql as q
from switchyard.observability.alert_rules import alert_rules_file
from switchyard.observability.provisioning import (
    ALERTS_FILE,
    grafana_dashboard_provider,
    grafana_datasource,
    prometheus_config,
)

DATASOURCE_VARIABLE = "datasource"
SCHEMA_VERSION = 39
PANEL_WIDTH = 12
PANEL_HEIGHT = 8
GRID_COLUMNS = 24


@dataclass(frozen=True)
class Target:
    expr: str
    legend: str


@dataclass(frozen=True)
class Panel:
    title: str
    targets: tuple[Target, ...]
    unit: str = "short"
    kind: str = "timeseries"
    description: str = ""


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    panels: tuple[Panel, ...]
    description: str


SWAP_ANNOTATION = Target(
    expr=q.current(m.SWAP_IN_PROGRESS, ("old", "new", "strategy", "phase"), agg="max") + " > 0",
    legend="swap {{old}} → {{new}} ({{strategy}}): {{phase}}",
)

PARK_ANNOTATION = Target(
    expr=q.changed(m.PARKS, ("model", "reason")),
    legend="parked {{model}} ({{reason}})",
)
WAKE_ANNOTATION = Target(
    expr=q.changed(m.WAKES, ("model", "trigger", "outcome")),
    legend="wake of {{model}} ({{trigger}}): {{outcome}}",
)

QUANTILES = (0.5, 0.95, 0.99)


def _latency(title: str, spec: m.MetricSpec, unit: str = "s") -> Panel:
    return Panel(
        title,
        tuple(
            Target(q.quantile(quantile, spec, ("model",)), f"{{{{model}}}} p{quantile * 100:g}")
            for quantile in QUANTILES
        ),
        unit=unit,
        description=spec.description,
    )


def _prefix_hit_rate() -> str:
    queries = q.rate(m.ENGINE_PREFIX_QUERIES, ("model_name",))
    hits = q.rate(m.ENGINE_PREFIX_HITS, ("model_name",))
    return q.ratio(q.or_zero(hits, queries), queries)


def dashboards() -> tuple[Dashboard, ...]:
    fleet = Dashboard(
        "switchyard-fleet",
        "Switchyard / Fleet overview",
        (
            Panel(
                "Model states",
                (
                    Target(
                        q.current(m.MODEL_STATE, ("model", "state"), agg="max") + " == 1",
                        "{{model}}: {{state}}",
                    ),
                ),
                kind="table",
                description=m.MODEL_STATE.description,
            ),
            Panel(
                "Aliases",
                (
                    Target(
                        q.current(m.ALIAS_TARGET, ("alias", "model"), agg="max") + " == 1",
                        "{{alias}} → {{model}}",
                    ),
                ),
                kind="table",
                description=m.ALIAS_TARGET.description,
            ),
            Panel(
                "Accelerators claimed / total per node",
                (
                    Target(
                        q.current(m.ACCELERATORS_CLAIMED, ("node",), agg="max"), "{{node}} claimed"
                    ),
                    Target(q.current(m.ACCELERATORS_TOTAL, ("node",), agg="max"), "{{node}} total"),
                ),
            ),
            Panel(
                "Staged weights and free disk per node",
                (
                    Target(q.current(m.STAGED_BYTES, ("node",), agg="max"), "{{node}} staged"),
                    Target(
                        q.current(m.DISK_FREE_BYTES, ("node",), agg="max"), "{{node}} disk free"
                    ),
                ),
                unit="bytes",
            ),
            Panel(
                "Weights staged per node by outcome",
                (
                    Target(
                        q.current(m.NODE_STAGINGS, ("node", "outcome")),
                        "{{node}} {{outcome}}",
                    ),
                    Target(
                        q.current(m.NODE_STAGED_DOWNLOAD_BYTES, ("node",), agg="max"),
                        "{{node}} bytes downloaded by the latest staging",
                    ),
                ),
                kind="table",
                description=m.NODE_STAGINGS.description,
            ),
            Panel(
                "Requests/s by outcome",
                (
                    Target(
                        q.rate(m.GATEWAY_REQUESTS, ("model", "outcome", "status_code")),
                        "{{model}} {{outcome}} {{status_code}}",
                    ),
                ),
                unit="reqps",
            ),
            Panel(
                "Fleet operations by outcome",
                (Target(q.current(m.OPERATIONS, ("kind", "outcome")), "{{kind}} {{outcome}}"),),
                kind="stat",
            ),
            Panel(
                "Admission decisions by reason",
                (
                    Target(
                        q.current(m.ADMISSION_DECISIONS, ("result", "reason")),
                        "{{result}}: {{reason}}",
                    ),
                ),
                kind="stat",
            ),
            Panel(
                "KV cache: logged over predicted tokens per model",
                (
                    Target(
                        q.current(m.KV_PREDICTION_RATIO, ("model",), agg="max"),
                        "{{model}}",
                    ),
                ),
                kind="stat",
                description=m.KV_PREDICTION_RATIO.description,
            ),
        ),
        "Models, their states and aliases, accelerators and disk per node; swaps as annotations.",
    )
    throughput = Dashboard(
        "switchyard-throughput",
        "Switchyard / Throughput per model",
        (
            Panel(
                "Generated tokens/s",
                (Target(q.rate(m.GATEWAY_GENERATED_TOKENS, ("model",)), "{{model}}"),),
                unit="tok/s",
            ),
            Panel(
                "Prompt tokens/s",
                (Target(q.rate(m.GATEWAY_PROMPT_TOKENS, ("model",)), "{{model}}"),),
                unit="tok/s",
            ),
            Panel(
                "Requests/s",
                (Target(q.rate(m.GATEWAY_REQUESTS, ("model",)), "{{model}}"),),
                unit="reqps",
            ),
            Panel(
                "Requests in flight",
                (Target(q.current(m.GATEWAY_IN_FLIGHT, ("model",)), "{{model}}"),),
            ),
        ),
        "Tokens per second generated and read, requests per second and in flight, per model.",
    )
    latency = Dashboard(
        "switchyard-latency",
        "Switchyard / Latency",
        (
            _latency("Time to first token", m.GATEWAY_TTFT),
            _latency("Inter-token latency", m.GATEWAY_ITL),
            _latency("End-to-end request latency", m.GATEWAY_E2E),
        ),
        "TTFT, inter-token and end-to-end latency per model (p50, p95, p99) at the gateway.",
    )
    engine = Dashboard(
        "switchyard-engine",
        "Switchyard / Engines",
        (
            Panel(
                "Requests running / waiting in the engine",
                (
                    Target(q.current(m.ENGINE_RUNNING, ("model_name",)), "{{model_name}} running"),
                    Target(q.current(m.ENGINE_WAITING, ("model_name",)), "{{model_name}} waiting"),
                ),
            ),
            Panel(
                "KV cache usage",
                (
                    Target(
                        q.current(m.ENGINE_KV_USAGE, ("model_name",), agg="max"), "{{model_name}}"
                    ),
                ),
                unit="percentunit",
            ),
            Panel(
                "Prefix cache hit rate",
                (Target(_prefix_hit_rate(), "{{model_name}}"),),
                unit="percentunit",
            ),
        ),
        "vLLM's own engine metrics, exported by Ray Serve LLM: queues and KV cache pressure.",
    )
    swaps = Dashboard(
        "switchyard-swaps",
        "Switchyard / Swaps",
        (
            Panel(
                "Latest swap: seconds per phase",
                (
                    Target(
                        q.current(
                            m.LAST_SWAP_PHASE_SECONDS,
                            ("old", "new", "strategy", "phase"),
                            agg="max",
                        ),
                        "{{old}} → {{new}} ({{strategy}}): {{phase}}",
                    ),
                ),
                unit="s",
                kind="bargauge",
            ),
            Panel(
                "Latest swap: seconds each alias had no model (0: make-before-break)",
                (
                    Target(
                        q.current(
                            m.LAST_SWAP_ALIAS_UNAVAILABLE_SECONDS,
                            ("alias", "old", "new", "strategy"),
                            agg="max",
                        ),
                        "{{alias}}: {{old}} → {{new}} ({{strategy}})",
                    ),
                ),
                unit="s",
                kind="bargauge",
            ),
            Panel(
                "Swaps by outcome",
                (
                    Target(
                        q.current(m.OPERATIONS, ("outcome",), matchers='kind="swap"'), "{{outcome}}"
                    ),
                ),
                kind="stat",
            ),
            Panel(
                "Mean duration of operations",
                (Target(q.mean(m.OPERATION_SECONDS, ("kind", "outcome")), "{{kind}} {{outcome}}"),),
                unit="s",
                description="Ray records histogram sums at bucket midpoints: approximate.",
            ),
            Panel(
                "Mean start-up time by step (every deployment: scheduling to warm-up)",
                (Target(q.mean(m.STARTUP_STEP_SECONDS, ("step",)), "{{step}}"),),
                unit="s",
                description="Ray records histogram sums at bucket midpoints: approximate.",
            ),
            Panel(
                "Phases run (all operations)",
                (Target(q.observations(m.PHASE_SECONDS, ("kind", "phase")), "{{kind}} {{phase}}"),),
                kind="stat",
            ),
            Panel(
                "Requests held now",
                (Target(q.current(m.GATEWAY_HELD, ("alias",)), "{{alias}}"),),
            ),
            Panel(
                "Held requests by outcome",
                (
                    Target(
                        q.observations(m.GATEWAY_HOLD, ("alias", "cause", "outcome")),
                        "{{alias}} {{cause}} {{outcome}}",
                    ),
                ),
                kind="stat",
            ),
            Panel(
                "Hold time p95",
                (Target(q.quantile(0.95, m.GATEWAY_HOLD, ("alias",)), "{{alias}}"),),
                unit="s",
            ),
            Panel(
                "Wakes of parked models (trigger, outcome)",
                (
                    Target(
                        q.current(m.WAKES, ("model", "trigger", "outcome")),
                        "{{model}} {{trigger}} {{outcome}}",
                    ),
                ),
                kind="stat",
            ),
            Panel(
                "Parks (idle, evicted to make room, manual)",
                (Target(q.current(m.PARKS, ("model", "reason")), "{{model}} {{reason}}"),),
                kind="stat",
            ),
            Panel(
                "Mean wake time (a cold start for park mode unload)",
                (Target(q.mean(m.WAKE_SECONDS, ("model", "park_mode")), "{{model}}"),),
                unit="s",
                description="Ray records histogram sums at bucket midpoints: approximate.",
            ),
            Panel(
                "Wakes: predicted and measured (latest, per path)",
                (
                    Target(
                        q.current(m.WAKE_PREDICTED_SECONDS, ("model", "path"), agg="max"),
                        "{{model}} {{path}} predicted",
                    ),
                    Target(
                        q.current(m.WAKE_MEASURED_SECONDS, ("model", "path"), agg="max"),
                        "{{model}} {{path}} measured",
                    ),
                ),
                unit="s",
                description="A wake from sleep is predicted from the bytes it moves over its "
                "links, corrected by the model's past wakes; a cold start by the model's last "
                "start.",
            ),
        ),
        "What swaps did: phase durations, outcomes, and the requests held while aliases moved; "
        "models parked and woken on demand.",
    )
    tenants = Dashboard(
        "switchyard-tenants",
        "Switchyard / Tenants",
        (
            Panel(
                "Requests/s per key",
                (Target(q.rate(m.KEY_REQUESTS, ("key", "outcome")), "{{key}} {{outcome}}"),),
                unit="reqps",
                description=m.KEY_REQUESTS.description,
            ),
            Panel(
                "Tokens/s per key",
                (
                    Target(q.rate(m.KEY_PROMPT_TOKENS, ("key",)), "{{key}} prompt"),
                    Target(q.rate(m.KEY_GENERATED_TOKENS, ("key",)), "{{key}} generated"),
                ),
                unit="tok/s",
            ),
            Panel(
                "Rejections/s per key and reason",
                (Target(q.rate(m.KEY_REJECTIONS, ("key", "reason")), "{{key}} {{reason}}"),),
                unit="reqps",
                description=m.KEY_REJECTIONS.description,
            ),
        ),
        "Per tenant key (by name, never the key): requests, tokens and quota rejections.",
    )
    return (fleet, throughput, latency, engine, swaps, tenants)


# ---------------------------------------------------------------- Grafana JSON


def _datasource() -> dict[str, str]:
    return {"type": "prometheus", "uid": f"${{{DATASOURCE_VARIABLE}}}"}


def _panel_json(panel: Panel, panel_id: int) -> dict[str, Any]:
    index = panel_id - 1
    return {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": _datasource(),
        "gridPos": {
            "h": PANEL_HEIGHT,
            "w": PANEL_WIDTH,
            "x": (index * PANEL_WIDTH) % GRID_COLUMNS,
            "y": (index * PANEL_WIDTH) // GRID_COLUMNS * PANEL_HEIGHT,
        },
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": {},
        "targets": [
            {
                "refId": chr(ord("A") + i),
                "datasource": _datasource(),
                "expr": target.expr,
                "legendFormat": target.legend,
                # Tables show the latest value of each series; charts show ranges.
                "instant": panel.kind == "table",
                "range": panel.kind != "table",
            }
            for i, target in enumerate(panel.targets)
        ],
    }


def dashboard_json(dashboard: Dashboard) -> dict[str, Any]:
    return {
        "uid": dashboard.uid,
        "title": dashboard.title,
        "description": dashboard.description,
        "tags": ["switchyard"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": DATASOURCE_VARIABLE,
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                    "hide": 0,
                }
            ]
        },
        "annotations": {
            "list": [
                {
                    "name": "Swaps",
                    "datasource": _datasource(),
                    "enable": True,
                    "iconColor": "orange",
                    "expr": SWAP_ANNOTATION.expr,
                    "titleFormat": SWAP_ANNOTATION.legend,
                    "tagKeys": "old,new,strategy,phase",
                    "step": "10s",
                },
                {
                    "name": "Parks",
                    "datasource": _datasource(),
                    "enable": True,
                    "iconColor": "purple",
                    "expr": PARK_ANNOTATION.expr,
                    "titleFormat": PARK_ANNOTATION.legend,
                    "tagKeys": "model,reason",
                    "step": "30s",
                },
                {
                    "name": "Wakes",
                    "datasource": _datasource(),
                    "enable": True,
                    "iconColor": "green",
                    "expr": WAKE_ANNOTATION.expr,
                    "titleFormat": WAKE_ANNOTATION.legend,
                    "tagKeys": "model,trigger,outcome",
                    "step": "30s",
                },
            ]
        },
        "panels": [_panel_json(p, i) for i, p in enumerate(dashboard.panels, start=1)],
    }


def every_expression() -> list[str]:
    """Every PromQL expression the dashboards run: panel targets and annotations."""
    found = [t.expr for d in dashboards() for p in d.panels for t in p.targets]
    return [*found, SWAP_ANNOTATION.expr, PARK_ANNOTATION.expr, WAKE_ANNOTATION.expr]


# ---------------------------------------------------------------- Prometheus and provisioning


def generated_files() -> dict[str, str]:
    """Path under `dashboards/` -> file text, exactly as committed."""
    files = {
        f"grafana/{d.uid}.json": json.dumps(dashboard_json(d), indent=2, ensure_ascii=False) + "\n"
        for d in dashboards()
    }
    header = "# Generated by `switchyard dashboards build`; edit switchyard/observability.\n"
    for path, data in (
        ("prometheus/prometheus.yml", prometheus_config()),
        (f"prometheus/{ALERTS_FILE}", alert_rules_file()),
        ("provisioning/dashboards/switchyard.yaml", grafana_dashboard_provider()),
        ("provisioning/datasources/switchyard.yaml", grafana_datasource()),
    ):
        files[path] = header + yaml.safe_dump(data, sort_keys=False)
    return files


def write_files(out_dir: Path) -> list[Path]:
    written = []
    for relative, text in generated_files().items():
        path = out_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
