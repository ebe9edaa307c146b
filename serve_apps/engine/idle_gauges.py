"""vLLM's scheduler gauges kept alive while the engine is idle.

Why this exists: vLLM sets `vllm:num_requests_running`, `..._waiting`,
`..._waiting_by_reason` and `vllm:kv_cache_usage_perc` only when an engine step hands back
scheduler stats (AsyncLLM's output handler), so only while a request is in flight. Ray's
core worker exports a gauge in the export interval after it was set, and the node's metrics
agent forgets a gauge not refreshed for two export intervals
(`ray/_private/telemetry/open_telemetry_metric_recorder.py`, the gauge TTL). An engine with
nothing in flight therefore has no such series at all, and the engine dashboard went blank
after every swap: NEW was idle once the swap's traffic ended, and OLD's series had aged out.

While nothing is in flight the true values are known: nothing runs or waits, and no KV block
is held by a request (vLLM counts the cached blocks of finished requests as free). The
replica publishes exactly those, under vLLM's own metric names and labels (so into the same
series), every half export interval while the engine is idle. While it is busy vLLM's own
per-step values stand. A removed model's replica stops publishing, so its gauges age out
within two export intervals and no panel shows it as live.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from serve_apps.loop_tasks import PeriodicRefresh

REPLICA_LABEL: Final = "ReplicaId"
"""The label vLLM's Ray metric wrappers add to every engine metric (`ray_wrappers.py`)."""
ENGINE_LABELS: Final = ("model_name", "engine", REPLICA_LABEL)
"""vLLM's labels of a per-engine gauge: the served name, the engine index, the replica."""
WAITING_REASONS: Final = ("capacity", "deferred")
"""vLLM's `WAITING_REASON_CAPACITY` and `WAITING_REASON_DEFERRED` (`v1/metrics/loggers.py`)."""


@dataclass(frozen=True)
class IdleGauge:
    """One vLLM gauge and its value on an idle engine."""

    name: str
    """Ray's metric name: vLLM's `vllm:x` with `:` replaced by `_`, as vLLM registers it."""
    extra_labels: tuple[str, ...] = ()
    value: float = 0.0


IDLE_GAUGES: Final[tuple[IdleGauge, ...]] = (
    IdleGauge("vllm_num_requests_running"),
    IdleGauge("vllm_num_requests_waiting"),
    IdleGauge("vllm_num_requests_waiting_by_reason", ("reason",)),
    IdleGauge("vllm_kv_cache_usage_perc"),
)


@dataclass(frozen=True)
class GaugeSample:
    name: str
    tags: dict[str, str]
    value: float


def idle_samples(
    model_name: str, engine_indexes: Sequence[int], replica_id: str
) -> list[GaugeSample]:
    """Every series an idle engine's gauges should show, with vLLM's label values."""
    samples: list[GaugeSample] = []
    for gauge in IDLE_GAUGES:
        for index in engine_indexes:
            base = {"model_name": model_name, "engine": str(index), REPLICA_LABEL: replica_id}
            if gauge.extra_labels == ("reason",):
                for reason in WAITING_REASONS:
                    samples.append(GaugeSample(gauge.name, {**base, "reason": reason}, 0.0))
            else:
                samples.append(GaugeSample(gauge.name, base, gauge.value))
    return samples


class EngineActivity(Protocol):
    """What the republisher needs to know of the engine."""

    def is_idle(self) -> bool: ...


class GaugeSink(Protocol):
    def set(self, sample: GaugeSample) -> None: ...


class IdleGaugeRepublisher:
    """Publishes `samples` into `sink` every `period_s` while `activity` says idle."""

    def __init__(
        self,
        activity: EngineActivity,
        samples: Sequence[GaugeSample],
        sink: GaugeSink,
        *,
        period_s: float,
    ) -> None:
        self._activity = activity
        self._samples = tuple(samples)
        self._sink = sink
        # A failed publish is logged and costs one period of dashboard data, never the
        # replica: PeriodicRefresh keeps going.
        self._loop = PeriodicRefresh(
            self._publish, False, period_s=period_s, what="the idle engine's gauges"
        )

    def publish_once(self) -> bool:
        """Publish the idle values if the engine is idle now; whether it did."""
        if not self._activity.is_idle():
            return False
        for sample in self._samples:
            self._sink.set(sample)
        return True

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _publish(self) -> bool:
        return self.publish_once()


class AsyncLLMActivity:
    """Idle when vLLM's output processor has no unfinished request (added at submission,
    removed when finished or aborted), the same bookkeeping its stats come from."""

    def __init__(self, engine_client: Any) -> None:
        self._client = engine_client

    def is_idle(self) -> bool:
        return not self._client.output_processor.has_unfinished_requests()


class RayGaugeSink:
    """`ray.util.metrics.Gauge`s of vLLM's names; created in the replica that owns the
    engine, so the series are the ones vLLM's own instruments export."""

    def __init__(self, gauge_factory: Callable[[str, tuple[str, ...]], Any] | None = None):
        self._factory = gauge_factory or _ray_gauge
        self._gauges: dict[str, Any] = {}

    def set(self, sample: GaugeSample) -> None:
        gauge = self._gauges.get(sample.name)
        if gauge is None:
            gauge = self._factory(sample.name, tuple(sample.tags))
            self._gauges[sample.name] = gauge
        gauge.set(sample.value, tags=sample.tags)


def _ray_gauge(name: str, tag_keys: tuple[str, ...]) -> Any:
    from ray.util.metrics import Gauge

    return Gauge(name, description=f"vLLM's {name} (idle value)", tag_keys=tag_keys)


def engine_idle_republisher(
    engine_client: Any, replica_id: str, *, period_s: float
) -> IdleGaugeRepublisher:
    """The republisher for one replica's running vLLM engine."""
    config = engine_client.vllm_config
    indexes = list(getattr(engine_client.logger_manager, "engine_indexes", None) or [0])
    samples = idle_samples(str(config.model_config.served_model_name), indexes, replica_id)
    return IdleGaugeRepublisher(
        AsyncLLMActivity(engine_client), samples, RayGaugeSink(), period_s=period_s
    )
