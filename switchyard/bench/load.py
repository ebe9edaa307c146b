"""Drive one load level: release requests (all at once, or Poisson arrivals), cap how many
are in flight, and collect every request's record.

This is the one place requests are issued. A future `switchyard bench --during-swap` plugs in
here: it would run `run_level` with a steady concurrency while it triggers the swap beside
it, then read the client-seen unavailability window, the held time and the failed requests
from the returned records (each has its send time, every chunk's arrival and its error;
`LevelRun.wall_offset_s` puts them on the same Unix clock as the swap's phase timestamps).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from switchyard.bench.client import Endpoint, new_http_client, stream_completion
from switchyard.bench.request_record import RequestRecord

REQUEST_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class LevelRun:
    records: tuple[RequestRecord, ...]
    """In prompt order (not completion order)."""
    duration_s: float
    """From the first release to the last request's end, as vLLM measures a run."""
    wall_offset_s: float
    """Add to a record's perf_counter() time to get Unix time."""


def poisson_delays_s(count: int, rate_per_s: float | None, seed: int) -> list[float]:
    """Gaps before each release: exponential with mean 1/rate (a Poisson process, vLLM's
    `--burstiness 1`); all zero when rate is None (every request is released at once)."""
    if rate_per_s is None:
        return [0.0] * count
    if rate_per_s <= 0:
        raise ValueError(f"request rate must be positive, got {rate_per_s}")
    rng = random.Random(seed)
    return [rng.expovariate(rate_per_s) for _ in range(count)]


async def run_level(
    endpoint: Endpoint,
    prompts: Sequence[str],
    *,
    output_len: int,
    concurrency: int,
    request_rate_per_s: float | None,
    seed: int = 0,
    on_done: Callable[[RequestRecord], None] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> LevelRun:
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    slots = asyncio.Semaphore(concurrency)
    delays = poisson_delays_s(len(prompts), request_rate_per_s, seed)

    async with new_http_client(concurrency, REQUEST_TIMEOUT_S, transport) as client:

        async def one(prompt: str) -> RequestRecord:
            async with slots:
                record = await stream_completion(client, endpoint, prompt, output_len)
            if on_done is not None:
                on_done(record)
            return record

        wall_offset = time.time() - time.perf_counter()
        started = time.perf_counter()
        tasks: list[asyncio.Task[RequestRecord]] = []
        for prompt, delay in zip(prompts, delays, strict=True):
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(prompt)))
        records = await asyncio.gather(*tasks)
        duration = time.perf_counter() - started
    return LevelRun(tuple(records), duration, wall_offset)
