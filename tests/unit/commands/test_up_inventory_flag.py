"""`switchyard up --inventory FILE`: the overrides reach the stack config, bad ones exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.inventory.overrides import NodeOverride
from domain.exit_codes import UserInputError
from switchyard.cli import build_parser
from switchyard.commands import up


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("SWITCHYARD_HOME", str(tmp_path / "home"))


def _build(*flags: str) -> object:
    return up.build_config(build_parser().parse_args(["up", "--accelerator", "cpu", *flags]))


def test_the_file_becomes_the_stacks_inventory_section(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text("overrides:\n  - node_ip: 127.0.0.1\n    host_ram_gib: 64\n")
    config = _build("--inventory", str(path))
    assert config.inventory.overrides == (  # type: ignore[attr-defined]
        NodeOverride(node_ip="127.0.0.1", host_ram_gib=64),
    )


def test_without_the_flag_nothing_is_overridden() -> None:
    assert _build().inventory.overrides == ()  # type: ignore[attr-defined]


def test_an_invalid_value_names_field_value_and_what_is_allowed(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text("overrides:\n  - node_ip: 127.0.0.1\n    gpu_model: h300\n")
    with pytest.raises(UserInputError) as caught:
        _build("--inventory", str(path))
    assert str(caught.value) == (
        "inventory.overrides.0.gpu_model: 'h300' is not allowed (unknown GPU model; allowed: "
        "a100-80g, b200, h100, h100-nvl, h100-pcie, h200, h200-nvl, l40s, rtx-pro-6000-blackwell, "
        "rtx-pro-6000-blackwell-max-q, cpu-standin)"
    )


def test_a_missing_file_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="--inventory: cannot read"):
        _build("--inventory", str(tmp_path / "absent.yaml"))
