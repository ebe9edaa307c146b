"""`add`/`swap` layout flags: an explicit layout, or `--layout auto` with `--objective`."""

from __future__ import annotations

import argparse

import pytest

from switchyard.cli import build_parser
from switchyard.commands.add import fleet_entry, model_config, swap_request

pytestmark = pytest.mark.unit


def _args(*flags: str) -> argparse.Namespace:
    return build_parser().parse_args(["add", "miniature:kimi-k2.5", "--name", "k", *flags])


def test_an_explicit_layout_with_dcp_reaches_the_config_and_needs_no_entry() -> None:
    args = _args("--tp", "2", "--dcp", "2")
    config = model_config(args)
    assert (config.layout.tp, config.layout.dcp) == (2, 2)
    assert fleet_entry(args, config) is None


@pytest.mark.parametrize(
    ("flags", "objective"), [((), "throughput"), (("--objective", "latency"), "latency")]
)
def test_layout_auto_asks_admission_for_the_objective(
    flags: tuple[str, ...], objective: str
) -> None:
    args = _args("--layout", "auto", *flags)
    config = model_config(args)
    entry = fleet_entry(args, config)
    assert entry is not None and entry.auto_layout and entry.objective == objective
    assert entry.name == "k" and entry.source == "miniature:kimi-k2.5"


def test_swap_carries_the_auto_entry() -> None:
    args = build_parser().parse_args(
        ["swap", "old", "miniature:kimi-k2.5", "--name", "k", "--layout", "auto"]
    )
    request = swap_request(args, "old", model_config(args))
    assert request.entry is not None and request.entry.auto_layout
