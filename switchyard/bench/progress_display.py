"""The live display while a sweep runs: one rich progress bar per level, on stderr."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Self

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from domain.operation import OperationEvent
from switchyard.bench.level_metrics import LevelMetrics
from switchyard.bench.request_record import RequestRecord


class _LiveDisplay:
    """Draws `self._progress` while the `with` block runs (the bars need a refresh thread)."""

    _progress: Progress

    def __enter__(self) -> Self:
        self._progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._progress.stop()


class RichSweepProgress(_LiveDisplay):
    """A `SweepObserver` that draws bars and prints each level's headline when it ends."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._progress = Progress(
            TextColumn("{task.description:>16}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[failed]} failed"),
            TimeElapsedColumn(),
            console=console,
        )
        self._task: TaskID | None = None
        self._failed = 0

    def level_started(self, label: str, total: int) -> None:
        self._failed = 0
        self._task = self._progress.add_task(label, total=total, failed=0)

    def request_done(self, record: RequestRecord) -> None:
        if self._task is None:
            return
        if not record.succeeded:
            self._failed += 1
        self._progress.update(self._task, advance=1, failed=self._failed)

    def level_finished(self, metrics: LevelMetrics | None) -> None:
        if metrics is not None and metrics.ttft is not None:
            self._progress.console.print(
                f"  concurrency {metrics.concurrency}: {metrics.output_tokens_per_s:,.1f} "
                f"output tok/s, TTFT p50 {metrics.ttft.p50_ms:,.1f} ms, "
                f"{metrics.failed} failed"
            )
        self._task = None


class RichSwapProgress(_LiveDisplay):
    """A `SwapObserver`: one open-ended bar for the steady load, and the manager's events
    printed above it as they happen."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("{task.description:>16}"),
            TextColumn("{task.completed} done"),
            TextColumn("{task.fields[failed]} failed"),
            TextColumn("{task.fields[models]}"),
            TimeElapsedColumn(),
            console=console,
        )
        self._task = self._progress.add_task("load during swap", total=None, failed=0, models="")
        self._failed = 0
        self._answered_by: dict[str, int] = {}

    def request_done(self, record: RequestRecord) -> None:
        if record.succeeded:
            name = record.served_model or "?"
            self._answered_by[name] = self._answered_by.get(name, 0) + 1
        else:
            self._failed += 1
        models = ", ".join(f"{name} {n}" for name, n in self._answered_by.items())
        self._progress.update(self._task, advance=1, failed=self._failed, models=models)

    def swap_event(self, event: OperationEvent) -> None:
        stamp = time.strftime("%H:%M:%S", time.localtime(event.at))
        phase = f"[{event.phase}] " if event.phase else ""
        # Markup off: manager messages quote names and lists in brackets.
        self._progress.console.print(f"{stamp} swap {phase}{event.message}", markup=False)
