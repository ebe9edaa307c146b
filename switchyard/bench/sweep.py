"""A concurrency sweep: one warm-up, then one measured level per concurrency, in order.

Every level sends the same prompts (so levels differ only in load); prompts differ from each
other, so the prefix cache does not shorten prefills.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from domain.exit_codes import Rejected
from switchyard.bench.client import Endpoint
from switchyard.bench.level_metrics import LevelMetrics, summarize
from switchyard.bench.load import LevelRun, run_level
from switchyard.bench.prompts import Prompt
from switchyard.bench.request_record import RequestRecord


class SweepObserver(Protocol):
    """Told about progress (the rich display implements it)."""

    def level_started(self, label: str, total: int) -> None: ...

    def request_done(self, record: RequestRecord) -> None: ...

    def level_finished(self, metrics: LevelMetrics | None) -> None: ...


@dataclass(frozen=True)
class LevelResult:
    metrics: LevelMetrics
    run: LevelRun


@dataclass(frozen=True)
class SweepPlan:
    endpoint: Endpoint
    prompts: tuple[Prompt, ...]
    warmup_prompts: tuple[Prompt, ...]
    output_len: int
    concurrency: tuple[int, ...]
    request_rate_per_s: float | None
    seed: int = 0


async def run_sweep(plan: SweepPlan, observer: SweepObserver) -> list[LevelResult]:
    await _warm_up(plan, observer)
    texts = [p.text for p in plan.prompts]
    counts = [p.token_count for p in plan.prompts]
    results: list[LevelResult] = []
    for level in plan.concurrency:
        observer.level_started(f"concurrency {level}", len(texts))
        run = await run_level(
            plan.endpoint,
            texts,
            output_len=plan.output_len,
            concurrency=level,
            request_rate_per_s=plan.request_rate_per_s,
            seed=plan.seed,
            on_done=observer.request_done,
        )
        metrics = summarize(
            run.records,
            duration_s=run.duration_s,
            concurrency=level,
            request_rate_per_s=plan.request_rate_per_s,
            prompt_tokens=counts,
        )
        observer.level_finished(metrics)
        results.append(LevelResult(metrics, run))
    return results


async def _warm_up(plan: SweepPlan, observer: SweepObserver) -> None:
    """Unmeasured requests first (connections, the engine's first batches). If every one
    fails, the endpoint, model or key is wrong: stop before the sweep with the reason."""
    if not plan.warmup_prompts:
        return
    observer.level_started("warm-up", len(plan.warmup_prompts))
    run = await run_level(
        plan.endpoint,
        [p.text for p in plan.warmup_prompts],
        output_len=plan.output_len,
        concurrency=max(plan.concurrency),
        request_rate_per_s=None,
        seed=plan.seed,
        on_done=observer.request_done,
    )
    observer.level_finished(None)
    if not any(r.succeeded for r in run.records):
        raise Rejected(
            f"every warm-up request to {plan.endpoint.base_url} failed: {_first_error(run.records)}"
        )


def _first_error(records: Sequence[RequestRecord]) -> str:
    return next((r.error for r in records if r.error), "no tokens came back")
