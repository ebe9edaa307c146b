"""The dashboards, provisioning and Prometheus files are generated from the metric catalogue:
the committed files are exactly what the generator makes, and every expression names only
metrics that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from domain.metric_names import ALL_METRICS, Kind
from switchyard.cli import main
from switchyard.observability.dashboards import (
    GRID_COLUMNS,
    dashboard_json,
    dashboards,
    every_expression,
    generated_files,
)

REPO = Path(__file__).resolve().parents[3]
DASHBOARDS = REPO / "dashboards"


def _series_names() -> set[str]:
    names = set()
    for spec in ALL_METRICS:
        if spec.kind is Kind.HISTOGRAM:
            names |= {spec.series(s) for s in ("_bucket", "_sum", "_count")}
        else:
            names.add(spec.exported)
    return names


def test_the_committed_files_are_exactly_what_the_generator_makes() -> None:
    generated = generated_files()
    committed = {
        str(p.relative_to(DASHBOARDS)): p.read_text()
        for p in DASHBOARDS.rglob("*")
        if p.is_file() and p.suffix in (".json", ".yml", ".yaml")
    }
    assert set(committed) == set(generated), "run `switchyard dashboards build`"
    for path, text in generated.items():
        assert committed[path] == text, f"{path} is stale: run `switchyard dashboards build`"


def test_dashboards_build_writes_the_same_files(tmp_path: Path) -> None:
    assert main(["dashboards", "build", "--out", str(tmp_path)]) == 0
    for path, text in generated_files().items():
        assert (tmp_path / path).read_text() == text


def test_every_expression_names_only_catalogued_metrics() -> None:
    known = _series_names()
    for expr in every_expression():
        names = set(re.findall(r"\bray_[A-Za-z0-9_]+", expr))
        assert names, expr
        assert names <= known, f"{expr} names {sorted(names - known)}"


def test_every_catalogued_gateway_and_manager_metric_is_charted() -> None:
    charted = " ".join(every_expression())
    for spec in ALL_METRICS:
        assert spec.exported in charted, f"{spec.name} is on no dashboard"


def test_metric_names_are_unique_and_prometheus_legal() -> None:
    names = [spec.name for spec in ALL_METRICS]
    assert len(names) == len(set(names))
    for spec in ALL_METRICS:
        assert re.fullmatch(r"[a-z_][a-z0-9_]*", spec.name), spec.name
        assert "request_id" not in spec.labels, "labels are never per request"
        if spec.kind is Kind.HISTOGRAM:
            assert list(spec.buckets) == sorted(set(spec.buckets)), spec.name


@pytest.mark.parametrize("dashboard", dashboards(), ids=lambda d: d.uid)
def test_panels_are_laid_out_on_grafanas_grid_with_unique_ids(dashboard: Any) -> None:
    data = dashboard_json(dashboard)
    ids = [p["id"] for p in data["panels"]]
    assert len(ids) == len(set(ids))
    for panel in data["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= GRID_COLUMNS
        assert panel["targets"], panel["title"]
        assert {t["refId"] for t in panel["targets"]} == {
            chr(ord("A") + i) for i in range(len(panel["targets"]))
        }
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


@pytest.mark.parametrize("dashboard", dashboards(), ids=lambda d: d.uid)
def test_dashboards_fit_grafanas_dashboard_model(dashboard: Any) -> None:
    """Read through the official grafana-foundation-sdk types and written back: nothing we
    emit is unknown to Grafana's model or lost on the way."""
    sdk = pytest.importorskip("grafana_foundation_sdk.models.dashboard")
    data = dashboard_json(dashboard)
    parsed = sdk.Dashboard.from_json(data)
    again = json.loads(json.dumps(parsed.to_json(), default=lambda o: o.to_json()))
    assert again["uid"] == data["uid"] and again["title"] == data["title"]
    assert again["schemaVersion"] == data["schemaVersion"]
    assert [p["title"] for p in again["panels"]] == [p["title"] for p in data["panels"]]
    assert [p["type"] for p in again["panels"]] == [p["type"] for p in data["panels"]]
    assert [p["gridPos"] for p in again["panels"]] == [p["gridPos"] for p in data["panels"]]
    (annotation,) = [a for a in again["annotations"]["list"] if a["name"] == "Swaps"]
    assert annotation["enable"] is True


def test_prometheus_config_scrapes_rays_service_discovery_file() -> None:
    config = yaml.safe_load((DASHBOARDS / "prometheus" / "prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    (sd,) = job["file_sd_configs"]
    assert sd["files"] == ["/tmp/ray/prom_metrics_service_discovery.json"]


def test_grafana_provisioning_points_at_the_dashboards_and_a_prometheus_datasource() -> None:
    provider = yaml.safe_load(
        (DASHBOARDS / "provisioning" / "dashboards" / "switchyard.yaml").read_text()
    )
    assert provider["apiVersion"] == 1
    assert provider["providers"][0]["type"] == "file"
    sources = yaml.safe_load(
        (DASHBOARDS / "provisioning" / "datasources" / "switchyard.yaml").read_text()
    )
    assert sources["datasources"][0]["type"] == "prometheus"
