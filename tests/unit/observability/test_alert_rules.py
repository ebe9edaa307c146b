"""The alert rules shipped with the dashboards: the four the issue names, each naming only
catalogued metrics, and the file Prometheus loads parses (promtool)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from domain.metric_names import ALL_METRICS
from switchyard.observability.alert_rules import alert_rules, alert_rules_file
from switchyard.observability.dashboards import generated_files
from switchyard.observability.provisioning import ALERTS_FILE, prometheus_config

EXPORTED = {spec.exported for spec in ALL_METRICS}


def test_the_four_alerts_are_shipped() -> None:
    assert {r.name for r in alert_rules()} == {
        "SwitchyardEngineDown",
        "SwitchyardSwapRolledBack",
        "SwitchyardQuotaSaturated",
        "SwitchyardDiskNearlyFull",
    }


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda r: r.name)
def test_each_rule_names_only_catalogued_metrics(rule: object) -> None:
    from switchyard.observability.alert_rules import AlertRule

    assert isinstance(rule, AlertRule)
    named = set(re.findall(r"\bray_[a-z0-9_]+", rule.expr))
    assert named and named <= EXPORTED, named - EXPORTED
    assert named == {spec.exported for spec in rule.metrics}
    assert rule.severity in ("warning", "critical") and rule.summary and rule.description


def test_prometheus_loads_the_rules_file_next_to_its_config() -> None:
    assert prometheus_config()["rule_files"] == [ALERTS_FILE]
    committed = generated_files()[f"prometheus/{ALERTS_FILE}"]
    assert yaml.safe_load(committed) == alert_rules_file()


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool (Debian `prometheus`) missing"
)
def test_promtool_parses_the_rules(tmp_path: Path) -> None:
    path = tmp_path / ALERTS_FILE
    path.write_text(yaml.safe_dump(alert_rules_file()))
    result = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 rules found" in result.stdout
