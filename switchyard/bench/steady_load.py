"""A steady load: `concurrency` clients that each send the next prompt as soon as their last
request ended, until told to stop (then they finish what is in flight and nothing more).

Unlike a sweep level (load.py), the number of requests is open-ended: the load lasts as long
as whatever it accompanies (a swap), so every moment of it is covered by requests in flight.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from switchyard.bench.client import Endpoint, new_http_client, stream_completion
from switchyard.bench.load import REQUEST_TIMEOUT_S
from switchyard.bench.request_record import RequestRecord


@dataclass(frozen=True)
class SteadyRun:
    records: tuple[RequestRecord, ...]
    """In completion order."""
    duration_s: float
    wall_offset_s: float
    """Add to a record's perf_counter() time to get Unix time."""


async def run_steady(
    endpoint: Endpoint,
    prompts: Sequence[str],
    *,
    output_len: int,
    concurrency: int,
    stop: asyncio.Event,
    on_done: Callable[[RequestRecord], None] | None = None,
    failure_pause_s: float = 0.1,
    transport: httpx.AsyncBaseTransport | None = None,
) -> SteadyRun:
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if not prompts:
        raise ValueError("a steady load needs at least one prompt")
    # Shared, so the clients walk through the prompts together and each prompt recurs only
    # after all the others (the prefix cache then rarely shortens a prefill).
    next_prompt = itertools.cycle(prompts)
    records: list[RequestRecord] = []

    async with new_http_client(concurrency, REQUEST_TIMEOUT_S, transport) as client:

        async def one_client() -> None:
            while not stop.is_set():
                record = await stream_completion(client, endpoint, next(next_prompt), output_len)
                records.append(record)
                if on_done is not None:
                    on_done(record)
                if not record.succeeded:
                    # An endpoint that refuses at once (503 while a model loads) would
                    # otherwise be hammered in a tight loop, starving the server's CPU.
                    await asyncio.sleep(failure_pause_s)

        wall_offset = time.time() - time.perf_counter()
        started = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(concurrency)))
        duration = time.perf_counter() - started
    return SteadyRun(tuple(records), duration, wall_offset)
