"""`switchyard metrics prometheus` without a Prometheus binary: a one-line error, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from switchyard.cli import main


def test_a_missing_prometheus_binary_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "prometheus"
    code = main(["metrics", "prometheus", "--binary", str(missing), "--state-dir", str(tmp_path)])
    assert code == 2
    error = capsys.readouterr().err
    assert str(missing) in error and "apt-get install prometheus" in error
    assert error.count("\n") == 1


def test_a_port_out_of_range_is_bad_input(tmp_path: Path) -> None:
    assert main(["metrics", "prometheus", "--port", "70000", "--state-dir", str(tmp_path)]) == 2
