"""`switchyard status --json`: stdout carries the JSON document and nothing else, even when
Ray's driver prints a cluster event (e.g. a dead node) while the status is collected."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from domain.operation import SCHEMA_VERSION
from domain.status_report import MetricsStatus, StatusReport
from switchyard.commands import status


def test_a_ray_event_printed_meanwhile_goes_to_stderr_not_into_the_document(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def collect(address: str) -> StatusReport:
        # What Ray's error listener thread does: print to the sys.stdout of the moment.
        print("(raylet) The node with node id abc has been marked dead")
        return StatusReport(
            address=address,
            endpoint=None,
            dashboard_url=None,
            routing_table_version=0,
            models=[],
            aliases={},
            metrics=MetricsStatus(prometheus_service_discovery_file="/tmp/sd.json"),
            inventory=None,
        )

    monkeypatch.setattr(status, "collect", collect)
    monkeypatch.setattr(status, "_add_live_metrics", lambda *_: None)
    from switchyard.cli import build_parser

    args = build_parser().parse_args(
        ["status", "--address", "127.0.0.1:6379", "--state-dir", str(tmp_path), "--json"]
    )
    captured_stdout = sys.stdout
    try:
        assert status.run(args) == 0
        print("(raylet) printed after the document")
    finally:
        # `run` leaves stdout pointing at stderr for the rest of the process; not the test's.
        sys.stdout = captured_stdout
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert document["address"] == "127.0.0.1:6379"
    assert document["schema_version"] == SCHEMA_VERSION
    assert StatusReport.model_validate(document).address == "127.0.0.1:6379"
    assert "marked dead" in err and "after the document" in err


def test_status_waits_for_no_scrape_window_by_default() -> None:
    from switchyard.cli import build_parser

    args = build_parser().parse_args(["status"])
    assert args.window_s == 0
