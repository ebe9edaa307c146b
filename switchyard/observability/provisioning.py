"""The Prometheus scrape config and Grafana's provisioning files, as data
(`dashboards.py` writes them with the dashboards)."""

from __future__ import annotations

from typing import Any

from cluster.telemetry.metrics_targets import RAY_SD_FILE

DATASOURCE_UID = "switchyard-prometheus"
FOLDER = "Switchyard"
GRAFANA_DASHBOARDS_DIR = "/var/lib/grafana/dashboards/switchyard"
ALERTS_FILE = "alerts.yml"
"""The alert rules' file, next to the Prometheus config that loads it."""


def prometheus_config(sd_file: str = RAY_SD_FILE, scrape_interval_s: int = 10) -> dict[str, Any]:
    """Scrape every node's Ray metrics agent, as listed by Ray's service discovery file, and
    evaluate Switchyard's alert rules (`alert_rules.py`; relative to this file)."""
    interval = f"{scrape_interval_s}s"
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [ALERTS_FILE],
        "scrape_configs": [
            {
                "job_name": "ray",
                "file_sd_configs": [{"files": [sd_file], "refresh_interval": "5s"}],
            }
        ],
    }


def grafana_dashboard_provider() -> dict[str, Any]:
    return {
        "apiVersion": 1,
        "providers": [
            {
                "name": "switchyard",
                "folder": FOLDER,
                "type": "file",
                "disableDeletion": False,
                "allowUiUpdates": False,
                "updateIntervalSeconds": 30,
                "options": {"path": GRAFANA_DASHBOARDS_DIR},
            }
        ],
    }


def grafana_datasource(url: str = "http://localhost:9090") -> dict[str, Any]:
    return {
        "apiVersion": 1,
        "datasources": [
            {
                "name": "Prometheus (Switchyard)",
                "uid": DATASOURCE_UID,
                "type": "prometheus",
                "access": "proxy",
                "url": url,
                "isDefault": True,
            }
        ],
    }
