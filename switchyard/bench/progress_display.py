"""The live display while a sweep runs: one rich progress bar per level, on stderr."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from switchyard.bench.metrics import LevelMetrics
from switchyard.bench.request_record import RequestRecord


class RichSweepProgress:
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

    def __enter__(self) -> RichSweepProgress:
        self._progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._progress.stop()

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
