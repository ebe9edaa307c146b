"""The manager's own live figures: the rates between its last two scrapes of the agents."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest

from cluster.telemetry.live_stats import Scrape
from cluster.telemetry.live_stats_sampler import MANAGER_SOURCE, LiveStatsSampler

pytestmark = pytest.mark.unit


class Scrapes:
    """Scrapes at 10 s intervals with 50 more generated tokens each time."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, targets: Iterable[str]) -> Scrape:
        self.calls.append(list(targets))
        n = len(self.calls)
        scrape = Scrape(at=10.0 * n)
        scrape.generated["mini"] = 50.0 * n
        scrape.requests["mini"] = 2.0 * n
        return scrape


def _sd_file(tmp_path: Path) -> Path:
    path = tmp_path / "sd.json"
    path.write_text(json.dumps([{"targets": ["127.0.0.1:1", "127.0.0.1:2"]}]))
    return path


def test_nothing_before_two_scrapes_then_the_rates_between_the_last_two(tmp_path: Path) -> None:
    scrapes = Scrapes()
    sampler = LiveStatsSampler(lambda: _sd_file(tmp_path), scrape=scrapes)
    assert sampler.latest() is None
    sampler.sample_once()
    assert sampler.latest() is None
    sampler.sample_once()
    sampler.sample_once()
    latest = sampler.latest()
    assert latest is not None
    assert (latest.source, latest.window_s) == (MANAGER_SOURCE, 10.0)
    (model,) = latest.models
    assert (model.model, model.generated_tok_s, model.requests_s) == ("mini", 5.0, 0.2)
    assert scrapes.calls[-1] == ["127.0.0.1:1", "127.0.0.1:2"]


def test_no_service_discovery_file_yet_means_no_scrape(tmp_path: Path) -> None:
    scrapes = Scrapes()
    sampler = LiveStatsSampler(lambda: tmp_path / "missing.json", scrape=scrapes)
    sampler.sample_once()
    sampler.sample_once()
    assert scrapes.calls == [] and sampler.latest() is None
