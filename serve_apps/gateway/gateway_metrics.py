"""What the gateway measures, and where it goes.

`Gateway` reports through the `GatewayMetrics` protocol; `RayGatewayMetrics` records into
Ray's metrics pipeline (each node's agent exports it, so several gateway replicas on several
nodes add up in Prometheus), and `RecordingGatewayMetrics` keeps everything in memory for
tests. Labels are the model, the requested alias, outcome and status: never per request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from domain.metric_names import (
    GATEWAY_E2E,
    GATEWAY_GENERATED_TOKENS,
    GATEWAY_HELD,
    GATEWAY_HOLD,
    GATEWAY_IN_FLIGHT,
    GATEWAY_ITL,
    GATEWAY_PROMPT_TOKENS,
    GATEWAY_REQUESTS,
    GATEWAY_TTFT,
    KEY_GENERATED_TOKENS,
    KEY_PROMPT_TOKENS,
    KEY_REJECTIONS,
    KEY_REQUESTS,
    MetricSpec,
)

NO_MODEL = "-"
"""The model label when the request never named a known model (401, 413, 404, bad JSON):
the raw requested name would let clients create unbounded label values."""


class RequestOutcome(StrEnum):
    OK = "ok"
    CLIENT_ERROR = "client_error"
    """4xx: the request was refused (auth, size, unknown model, invalid fields)."""
    UNAVAILABLE = "unavailable"
    """5xx before the first byte: loading, draining, hold timeout, dead engine."""
    STREAM_ERROR = "stream_error"
    """The stream had started (200 sent) and broke; the client got an error event."""
    CANCELLED = "cancelled"
    """The client went away before the answer was complete."""


class HoldCause(StrEnum):
    """Why a request was held (the hold metric's `cause` label)."""

    SWAP = "swap"
    """A swap is moving its alias."""
    WAKE = "wake"
    """Its model is parked or waking."""


class HoldOutcome(StrEnum):
    RELEASED = "released"
    """The swap ended; the request went on to NEW (or back to OLD)."""
    TIMEOUT = "timeout"
    """The hold outlasted the gateway's bound: 503."""
    QUEUE_FULL = "queue_full"
    """Too many requests held already: 503 at once."""
    TOO_LONG = "too_long"
    """The manager predicted a hold longer than the bound: 503 at once, Retry-After the
    predicted remaining time."""
    WAKE_ENDED = "wake_ended"
    """The parked model's wake ended without serving it (refused or failed): 503."""


@dataclass(frozen=True)
class RequestRecord:
    """One finished request, as the gateway saw it."""

    model: str
    alias: str
    """The alias the client asked for, or "" when it named the model itself."""
    outcome: RequestOutcome
    status_code: int
    seconds: float
    ttft_s: float | None = None
    inter_token_s: tuple[float, ...] = ()
    prompt_tokens: int | None = None
    generated_tokens: int | None = None
    tenant: str = ""
    """The tenant key's name; "" on an endpoint without keys or before authentication."""

    @property
    def tokens(self) -> int:
        return (self.prompt_tokens or 0) + (self.generated_tokens or 0)


class GatewayMetrics(Protocol):
    def request_finished(self, record: RequestRecord) -> None: ...

    def key_rejected(self, key: str, reason: str) -> None:
        """A tenant's request refused (`tenant_gate.Rejection`); `key` is its name."""

    def in_flight(self, counts: Mapping[str, int]) -> None:
        """Requests in flight per model now (models missing from `counts` have none)."""

    def held(self, counts: Mapping[str, int]) -> None:
        """Requests held now per alias (aliases missing from `counts` have none)."""

    def hold_finished(
        self, alias: str, outcome: HoldOutcome, seconds: float, cause: HoldCause = HoldCause.SWAP
    ) -> None: ...


@dataclass
class RecordingGatewayMetrics:
    """Keeps what the gateway reports, for tests and for reading back in-process."""

    requests: list[RequestRecord] = field(default_factory=list)
    in_flight_now: dict[str, int] = field(default_factory=dict)
    held_now: dict[str, int] = field(default_factory=dict)
    holds: list[tuple[str, HoldOutcome, float, HoldCause]] = field(default_factory=list)
    rejections: list[tuple[str, str]] = field(default_factory=list)

    def request_finished(self, record: RequestRecord) -> None:
        self.requests.append(record)

    def key_rejected(self, key: str, reason: str) -> None:
        self.rejections.append((key, reason))

    def in_flight(self, counts: Mapping[str, int]) -> None:
        self.in_flight_now = dict(counts)

    def held(self, counts: Mapping[str, int]) -> None:
        self.held_now = dict(counts)

    def hold_finished(
        self, alias: str, outcome: HoldOutcome, seconds: float, cause: HoldCause = HoldCause.SWAP
    ) -> None:
        self.holds.append((alias, outcome, seconds, cause))


def ray_metric(spec: MetricSpec) -> Any:
    """A `ray.util.metrics` instrument for `spec` (call inside a replica or actor)."""
    from ray.util.metrics import Counter, Gauge, Histogram

    if spec.kind == "counter":
        return Counter(spec.name, description=spec.description, tag_keys=spec.labels)
    if spec.kind == "gauge":
        return Gauge(spec.name, description=spec.description, tag_keys=spec.labels)
    return Histogram(
        spec.name,
        description=spec.description,
        boundaries=list(spec.buckets),
        tag_keys=spec.labels,
    )


def sampled_gaps(gaps: tuple[float, ...], seen: int, every: int) -> tuple[tuple[float, ...], int]:
    """(the gaps to record, the new count of gaps seen): one in `every`, counted across
    requests, so every request's gaps weigh in proportion to their number, as unsampled."""
    first = (-seen) % every
    return gaps[first::every], seen + len(gaps)


class RayGatewayMetrics:
    """Records into Ray's metrics pipeline; create it in the replica's constructor.

    Inter-token gaps are sampled (`inter_token_sample_every`): a Ray histogram observation
    costs about 3 us, once per token it was the largest single cost of the relay after the
    socket writes. The histogram's quantiles and mean stay those of every gap; its `_count`
    counts the recorded ones (token counts are the generated-tokens counter's)."""

    def __init__(self, inter_token_sample_every: int = 1) -> None:
        self._itl_every = inter_token_sample_every
        self._itl_seen = 0
        self._requests = ray_metric(GATEWAY_REQUESTS)
        self._prompt_tokens = ray_metric(GATEWAY_PROMPT_TOKENS)
        self._generated_tokens = ray_metric(GATEWAY_GENERATED_TOKENS)
        self._ttft = ray_metric(GATEWAY_TTFT)
        self._itl = ray_metric(GATEWAY_ITL)
        self._e2e = ray_metric(GATEWAY_E2E)
        self._in_flight = ray_metric(GATEWAY_IN_FLIGHT)
        self._held = ray_metric(GATEWAY_HELD)
        self._hold = ray_metric(GATEWAY_HOLD)
        self._key_requests = ray_metric(KEY_REQUESTS)
        self._key_prompt_tokens = ray_metric(KEY_PROMPT_TOKENS)
        self._key_generated_tokens = ray_metric(KEY_GENERATED_TOKENS)
        self._key_rejections = ray_metric(KEY_REJECTIONS)
        # Gauges keep a label set until it is set again; remember every one so a model that
        # went idle reads 0 instead of its last busy value.
        self._seen_models: set[str] = set()
        self._seen_aliases: set[str] = set()

    def request_finished(self, record: RequestRecord) -> None:
        model = {"model": record.model}
        self._requests.inc(
            1,
            {
                "model": record.model,
                "alias": record.alias,
                "outcome": record.outcome.value,
                "status_code": str(record.status_code),
            },
        )
        self._e2e.observe(record.seconds, {"model": record.model, "outcome": record.outcome.value})
        if record.ttft_s is not None:
            self._ttft.observe(record.ttft_s, model)
        recorded, self._itl_seen = sampled_gaps(
            record.inter_token_s, self._itl_seen, self._itl_every
        )
        for gap in recorded:
            self._itl.observe(gap, model)
        if record.prompt_tokens:
            self._prompt_tokens.inc(record.prompt_tokens, model)
        if record.generated_tokens:
            self._generated_tokens.inc(record.generated_tokens, model)
        if record.tenant:
            key = {"key": record.tenant}
            self._key_requests.inc(1, {**key, "outcome": record.outcome.value})
            if record.prompt_tokens:
                self._key_prompt_tokens.inc(record.prompt_tokens, key)
            if record.generated_tokens:
                self._key_generated_tokens.inc(record.generated_tokens, key)

    def key_rejected(self, key: str, reason: str) -> None:
        self._key_rejections.inc(1, {"key": key, "reason": reason})

    def in_flight(self, counts: Mapping[str, int]) -> None:
        self._seen_models.update(counts)
        for name in self._seen_models:
            self._in_flight.set(counts.get(name, 0), {"model": name})

    def held(self, counts: Mapping[str, int]) -> None:
        self._seen_aliases.update(counts)
        for alias in self._seen_aliases:
            self._held.set(counts.get(alias, 0), {"alias": alias})

    def hold_finished(
        self, alias: str, outcome: HoldOutcome, seconds: float, cause: HoldCause = HoldCause.SWAP
    ) -> None:
        tags = {"alias": alias, "outcome": outcome.value, "cause": cause.value}
        self._hold.observe(seconds, tags)


class DiscardGatewayMetrics:
    """Measures nothing: for gateways built without a metrics pipeline."""

    def request_finished(self, record: RequestRecord) -> None:
        return None

    def key_rejected(self, key: str, reason: str) -> None:
        return None

    def in_flight(self, counts: Mapping[str, int]) -> None:
        return None

    def held(self, counts: Mapping[str, int]) -> None:
        return None

    def hold_finished(
        self, alias: str, outcome: HoldOutcome, seconds: float, cause: HoldCause = HoldCause.SWAP
    ) -> None:
        return None


def outcome_of_status(status: int) -> RequestOutcome:
    if status < 400:
        return RequestOutcome.OK
    return RequestOutcome.CLIENT_ERROR if status < 500 else RequestOutcome.UNAVAILABLE


class TenantAccounting:
    """Wraps the gateway's metrics so every finished request also charges its tokens to
    its tenant's quota (`TenantGate.used_tokens`): the one place a request's end is known,
    streamed or not, complete or cut short."""

    def __init__(self, inner: GatewayMetrics, charge: Callable[[str, int], None]) -> None:
        self._inner = inner
        self._charge = charge

    def request_finished(self, record: RequestRecord) -> None:
        if record.tenant:
            self._charge(record.tenant, record.tokens)
        self._inner.request_finished(record)

    def key_rejected(self, key: str, reason: str) -> None:
        self._inner.key_rejected(key, reason)

    def in_flight(self, counts: Mapping[str, int]) -> None:
        self._inner.in_flight(counts)

    def held(self, counts: Mapping[str, int]) -> None:
        self._inner.held(counts)

    def hold_finished(
        self, alias: str, outcome: HoldOutcome, seconds: float, cause: HoldCause = HoldCause.SWAP
    ) -> None:
        self._inner.hold_finished(alias, outcome, seconds, cause)
