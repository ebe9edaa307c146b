"""`python -m benchmarks` as one tool: every suite is listed, runs through one front door, and
BENCHMARKS.md's blocks are exactly what each suite's one result file renders (a record never
drifts from its data)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import report
from benchmarks.suites import BENCHMARKS_MD, REPO_ROOT, RESULTS, SUITES

pytestmark = pytest.mark.unit


def test_list_names_every_suite_the_issue_asks_for() -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "benchmarks", "list"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
    ).stdout
    names = [line.split()[0] for line in listed.splitlines()]
    assert names == [s.name for s in SUITES]
    required = {"serving-comparison", "relay-capacity", "swap-time", "soak"}
    assert required | {"planner-calibration", "plan-latency"} <= set(names)


@pytest.mark.parametrize("suite", SUITES, ids=lambda s: s.name)
def test_each_suite_runs_and_renders_through_its_record(suite) -> None:
    module = importlib.import_module(suite.module)
    assert suite == module.SUITE
    assert callable(module.main) and callable(module.markdown)


def test_there_is_one_result_file_per_suite() -> None:
    kept = {p.name for p in RESULTS.glob("*.json")}
    assert kept == {s.result.name for s in SUITES}


def test_every_block_in_benchmarks_md_is_what_its_result_file_renders(tmp_path: Path) -> None:
    copy = tmp_path / "BENCHMARKS.md"
    copy.write_text(BENCHMARKS_MD.read_text())
    for suite in SUITES:
        report(suite, copy)
    assert copy.read_text() == BENCHMARKS_MD.read_text()
