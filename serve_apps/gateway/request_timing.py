"""One request's timings and token counts as the gateway sees them, until it is recorded."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from serve_apps.gateway.gateway_metrics import NO_MODEL, RequestOutcome, RequestRecord
from serve_apps.relay.stream_usage import Usage


@dataclass
class RequestTiming:
    started: float = field(default_factory=time.monotonic)
    model: str = NO_MODEL
    alias: str = ""
    tenant: str = ""
    request_id: str = ""
    engine_request_id: str = ""
    """What the engine knows the request as (`request_id.py`)."""
    strip_usage: bool = False
    """The gateway asked the engine for a usage report the client did not ask for."""
    usage: Usage = field(default_factory=Usage)
    first_chunk_at: float | None = None
    last_chunk_at: float | None = None
    gaps: list[float] = field(default_factory=list)

    def chunk(self, tokens: int = 1) -> None:
        """`tokens` events with content left the gateway now, in one write: the first
        after the gap since the last write, the others right behind it (a gap of 0 each),
        so inter-token latency counts one gap per token event, as vLLM's does."""
        at = time.monotonic()
        if self.first_chunk_at is None:
            self.first_chunk_at = at
            tokens -= 1
        elif self.last_chunk_at is not None:
            self.gaps.append(at - self.last_chunk_at)
            tokens -= 1
        if tokens > 0:
            self.gaps.extend([0.0] * tokens)
        self.last_chunk_at = at

    def record(self, outcome: RequestOutcome, status_code: int) -> RequestRecord:
        return RequestRecord(
            model=self.model,
            alias=self.alias,
            outcome=outcome,
            status_code=status_code,
            seconds=time.monotonic() - self.started,
            ttft_s=None if self.first_chunk_at is None else self.first_chunk_at - self.started,
            inter_token_s=tuple(self.gaps),
            prompt_tokens=self.usage.prompt_tokens,
            generated_tokens=self.usage.generated_tokens,
            tenant=self.tenant,
        )
