"""An idle engine's scheduler gauges are published with vLLM's names and labels; a busy
engine's are left to vLLM (serve_apps/engine/idle_gauges.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from serve_apps.engine.idle_gauges import (
    GaugeSample,
    IdleGaugeRepublisher,
    RayGaugeSink,
    idle_samples,
)

pytestmark = pytest.mark.unit


class _Activity:
    def __init__(self) -> None:
        self.idle = True

    def is_idle(self) -> bool:
        return self.idle


class _Sink:
    def __init__(self) -> None:
        self.samples: list[GaugeSample] = []

    def set(self, sample: GaugeSample) -> None:
        self.samples.append(sample)


def test_idle_values_cover_every_charted_gauge_with_vllms_labels() -> None:
    samples = idle_samples("mini-kimi-k2.5", [0], "r1")
    names = {s.name for s in samples}
    assert {
        "vllm_num_requests_running",
        "vllm_num_requests_waiting",
        "vllm_kv_cache_usage_perc",
    } <= names
    running = next(s for s in samples if s.name == "vllm_num_requests_running")
    assert running.tags == {"model_name": "mini-kimi-k2.5", "engine": "0", "ReplicaId": "r1"}
    assert all(s.value == 0.0 for s in samples)
    reasons = {s.tags["reason"] for s in samples if "reason" in s.tags}
    assert reasons == {"capacity", "deferred"}


def test_one_series_per_engine_index() -> None:
    samples = idle_samples("m", [0, 1], "r1")
    engines = {s.tags["engine"] for s in samples if s.name == "vllm_kv_cache_usage_perc"}
    assert engines == {"0", "1"}


def test_publishes_only_while_the_engine_is_idle() -> None:
    activity, sink = _Activity(), _Sink()
    republisher = IdleGaugeRepublisher(activity, idle_samples("m", [0], "r"), sink, period_s=1)
    assert republisher.publish_once()
    published = len(sink.samples)
    activity.idle = False
    assert not republisher.publish_once()
    assert len(sink.samples) == published


def test_keeps_publishing_every_period_until_stopped() -> None:
    activity, sink = _Activity(), _Sink()
    samples = idle_samples("m", [0], "r")

    async def run() -> int:
        republisher = IdleGaugeRepublisher(activity, samples, sink, period_s=0.01)
        republisher.start()
        await asyncio.sleep(0.1)
        await republisher.stop()
        return len(sink.samples)

    assert asyncio.run(run()) >= 3 * len(samples)


def test_a_failing_publish_does_not_stop_the_loop() -> None:
    class Flaky(_Activity):
        calls = 0

        def is_idle(self) -> bool:
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("engine client gone for a moment")
            return True

    activity, sink = Flaky(), _Sink()

    async def run() -> None:
        republisher = IdleGaugeRepublisher(
            activity, idle_samples("m", [0], "r"), sink, period_s=0.01
        )
        republisher.start()
        await asyncio.sleep(0.1)
        await republisher.stop()

    asyncio.run(run())
    assert sink.samples


def test_the_ray_sink_makes_one_instrument_per_name_with_the_sample_label_keys() -> None:
    made: list[tuple[str, tuple[str, ...]]] = []
    sets: list[tuple[float, dict[str, str]]] = []

    class Gauge:
        def set(self, value: float, tags: dict[str, str]) -> None:
            sets.append((value, tags))

    def factory(name: str, keys: tuple[str, ...]) -> Any:
        made.append((name, keys))
        return Gauge()

    sink = RayGaugeSink(factory)
    for sample in idle_samples("m", [0], "r"):
        sink.set(sample)
    assert len(made) == len({name for name, _ in made})
    assert ("vllm_num_requests_running", ("model_name", "engine", "ReplicaId")) in made
    assert len(sets) == len(idle_samples("m", [0], "r"))
