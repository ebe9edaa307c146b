"""`switchyard bench --during-swap`: a steady load runs, the swap is triggered beside it after
a delay, the load continues a little after the swap has ended, and the records and the
manager's events become a `SwapWindow` (swap_window.py).

The swap itself is a blocking call (the fleet manager's operation, followed until it ends);
it runs in a worker thread so the load's event loop never waits on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import httpx

from domain.operation import OperationEvent, OperationResult
from switchyard.bench.client import Endpoint
from switchyard.bench.level_metrics import LevelMetrics, summarize
from switchyard.bench.request_record import RequestRecord
from switchyard.bench.steady_load import SteadyRun, run_steady
from switchyard.bench.swap_window import SwapWindow, phase_spans, swap_window

EventSink = Callable[[OperationEvent], None]
SwapCall = Callable[[EventSink], OperationResult | None]
"""Runs the swap to its end, handing each manager event to the sink; returns the manager's
operation result (None when the manager died during it)."""


class SwapObserver(Protocol):
    def request_done(self, record: RequestRecord) -> None: ...

    def swap_event(self, event: OperationEvent) -> None: ...


@dataclass(frozen=True)
class SwapLoadPlan:
    endpoint: Endpoint
    prompts: tuple[str, ...]
    prompt_tokens: tuple[int, ...]
    """The client's token count per prompt, for the load's metrics."""
    output_len: int
    concurrency: int
    new_model: str
    delay_s: float
    tail_s: float


@dataclass(frozen=True)
class SwapLoadResult:
    load: SteadyRun
    metrics: LevelMetrics
    """The whole steady load as one level (throughput through the swap, latencies)."""
    operation: OperationResult | None
    window: SwapWindow


async def run_during_swap(
    plan: SwapLoadPlan,
    swap: SwapCall,
    observer: SwapObserver,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> SwapLoadResult:
    stop = asyncio.Event()
    load = asyncio.create_task(
        run_steady(
            plan.endpoint,
            plan.prompts,
            output_len=plan.output_len,
            concurrency=plan.concurrency,
            stop=stop,
            on_done=observer.request_done,
            transport=transport,
        )
    )
    operation: OperationResult | None = None
    try:
        await _sleep_unless_done(load, plan.delay_s)
        if load.done():
            load.result()  # the load itself failed (a bug): raise its exception here
        operation = await asyncio.to_thread(swap, observer.swap_event)
        await _sleep_unless_done(load, plan.tail_s)
    finally:
        stop.set()
    run = await load
    return SwapLoadResult(
        load=run,
        metrics=_metrics(run, plan),
        operation=operation,
        window=window_of(run, operation, plan.new_model),
    )


def window_of(run: SteadyRun, operation: OperationResult | None, new_model: str) -> SwapWindow:
    events: Sequence[OperationEvent] = operation.events if operation else ()
    return swap_window(
        run.records, new_model=new_model, phases=phase_spans(events, run.wall_offset_s)
    )


def _metrics(run: SteadyRun, plan: SwapLoadPlan) -> LevelMetrics:
    # Each record's prompt is not tracked through the cycle; every prompt has the same
    # exact length, so the first one's count stands for all.
    count = plan.prompt_tokens[0] if plan.prompt_tokens else 0
    return summarize(
        run.records,
        duration_s=max(run.duration_s, 1e-9),
        concurrency=plan.concurrency,
        request_rate_per_s=None,
        prompt_tokens=[count] * len(run.records),
    )


async def _sleep_unless_done(task: asyncio.Task[SteadyRun], seconds: float) -> None:
    await asyncio.wait({task}, timeout=seconds)
