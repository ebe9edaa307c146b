"""What the client saw of one streamed request: when it was sent and when each chunk arrived.

Every latency metric is derived from these timestamps alone, exactly as `vllm bench serve`
derives them (vllm/benchmarks/lib/endpoint_request_func.py), so numbers compare:

- TTFT: first chunk that carries a choice (even with empty text) minus the send time.
- ITL: the gaps between consecutive such chunks (one per chunk, not per token: a server
  that bundles tokens into one chunk yields fewer, longer gaps, as in vLLM's tool).
- E2EL: the last such chunk minus the send time (the usage-only chunk and `[DONE]` that
  follow do not count).
- TPOT: (E2EL - TTFT) / (output tokens - 1), only for requests with more than one token.

Timestamps are `time.perf_counter()` seconds; `wall_offset_s` turns them into Unix time.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise


@dataclass(frozen=True)
class RequestRecord:
    start_s: float
    """perf_counter() just before the request was sent (after any concurrency wait)."""
    chunk_times_s: tuple[float, ...]
    """perf_counter() of every streamed chunk that carried a choice, in arrival order."""
    prompt_tokens: int | None = None
    """The server's `usage.prompt_tokens`, when it sent usage."""
    completion_tokens: int | None = None
    """The server's `usage.completion_tokens`, when it sent usage."""
    error: str | None = None
    """One line: why the request failed; None when it succeeded."""
    served_model: str | None = None
    """The `model` the server named in its chunks (an alias resolves to a served name), so a
    load through a swap can tell OLD's answers from NEW's."""

    @property
    def succeeded(self) -> bool:
        return self.error is None and bool(self.chunk_times_s)

    @property
    def output_tokens(self) -> int:
        """The server's count when it reported one; otherwise one token per chunk."""
        if not self.succeeded:
            return 0
        if self.completion_tokens is not None:
            return self.completion_tokens
        return len(self.chunk_times_s)

    @property
    def ttft_s(self) -> float | None:
        return self.chunk_times_s[0] - self.start_s if self.succeeded else None

    @property
    def e2el_s(self) -> float | None:
        return self.chunk_times_s[-1] - self.start_s if self.succeeded else None

    @property
    def itls_s(self) -> tuple[float, ...]:
        if not self.succeeded:
            return ()
        times = self.chunk_times_s
        return tuple(later - earlier for earlier, later in pairwise(times))

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first; None for failed or one-token requests."""
        ttft, e2el, tokens = self.ttft_s, self.e2el_s, self.output_tokens
        if ttft is None or e2el is None or tokens <= 1:
            return None
        return (e2el - ttft) / (tokens - 1)


def failed_record(start_s: float, error: str) -> RequestRecord:
    return RequestRecord(start_s=start_s, chunk_times_s=(), error=error)
