"""Staging progress per node: bytes, rate and ETA, as a rich bar on a terminal or as plain
periodic lines otherwise (Ray task output ends up in `ray job logs` that way); and how byte
counts, rates and durations read in those lines and in messages.

Progress is measured by watching the entry directory grow rather than by hooking the
download library's own bars: it works the same for plain HTTP and Xet transfers and for any
number of parallel file downloads.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

# --- How byte counts, rates and durations read

_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(count: float) -> str:
    """1536 -> '1.5 KiB'; exact below 1 KiB so small test models read naturally."""
    value = float(count)
    sign = "-" if value < 0 else ""
    value = abs(value)
    for unit in _BINARY_UNITS:
        if value < 1024 or unit == _BINARY_UNITS[-1]:
            return f"{sign}{int(value)} B" if unit == "B" else f"{sign}{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_rate(bytes_per_s: float) -> str:
    return f"{format_bytes(bytes_per_s)}/s"


def format_duration(seconds: float | None) -> str:
    """'1h02m', '4m05s', '12s'; '?' when unknown."""
    if seconds is None or seconds < 0:
        return "?"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


# --- Progress

_RATE_WINDOW_S = 30.0

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProgressSample:
    node: str
    model: str
    done_bytes: int
    total_bytes: int
    elapsed_s: float
    rate_bytes_per_s: float | None
    eta_s: float | None

    def describe(self) -> str:
        share = 100.0 * self.done_bytes / self.total_bytes if self.total_bytes else 100.0
        rate = "?" if self.rate_bytes_per_s is None else format_rate(self.rate_bytes_per_s)
        return (
            f"staging {self.model} on node {self.node}: {format_bytes(self.done_bytes)} / "
            f"{format_bytes(self.total_bytes)} ({share:.1f}%), {rate}, "
            f"ETA {format_duration(self.eta_s)}"
        )


class RateWindow:
    """Download rate over the last `window_s` seconds (recent speed predicts the ETA better
    than the average since the start, which a resume or a slow first minute would skew)."""

    def __init__(self, window_s: float = _RATE_WINDOW_S) -> None:
        self._window_s = window_s
        self._points: deque[tuple[float, int]] = deque()

    def add(self, at_s: float, done_bytes: int) -> None:
        self._points.append((at_s, done_bytes))
        while len(self._points) > 2 and at_s - self._points[1][0] >= self._window_s:
            self._points.popleft()

    def rate(self) -> float | None:
        if len(self._points) < 2:
            return None
        (t0, b0), (t1, b1) = self._points[0], self._points[-1]
        return (b1 - b0) / (t1 - t0) if t1 > t0 else None


def eta_s(remaining_bytes: int, rate_bytes_per_s: float | None) -> float | None:
    if remaining_bytes <= 0:
        return 0.0
    if rate_bytes_per_s is None or rate_bytes_per_s <= 0:
        return None
    return remaining_bytes / rate_bytes_per_s


class ProgressSink(Protocol):
    """Where progress goes. `update` is called about once a second."""

    def update(self, sample: ProgressSample) -> None: ...

    def finish(self, sample: ProgressSample, ok: bool) -> None: ...


class LogProgressSink:
    """One plain line every `interval_s` seconds, plus a final line."""

    def __init__(self, stream: TextIO, interval_s: float) -> None:
        self._stream = stream
        self._interval_s = interval_s
        self._last_line_at: float | None = None

    def update(self, sample: ProgressSample) -> None:
        now = time.monotonic()
        if self._last_line_at is not None and now - self._last_line_at < self._interval_s:
            return
        self._last_line_at = now
        self._write(sample.describe())

    def finish(self, sample: ProgressSample, ok: bool) -> None:
        outcome = "done" if ok else "stopped"
        self._write(f"{sample.describe()} [{outcome} after {format_duration(sample.elapsed_s)}]")

    def _write(self, line: str) -> None:
        self._stream.write(line + "\n")
        self._stream.flush()


class RichProgressSink:
    """A live rich progress bar, for people watching a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            DownloadColumn(binary_units=True),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(file=stream),
            transient=False,
        )
        self._task: TaskID | None = None

    def update(self, sample: ProgressSample) -> None:
        if self._task is None:
            self._progress.start()
            self._task = self._progress.add_task(
                f"{sample.model} @ {sample.node}", total=sample.total_bytes
            )
        self._progress.update(self._task, completed=sample.done_bytes)

    def finish(self, sample: ProgressSample, ok: bool) -> None:
        self.update(sample)
        self._progress.stop()


def default_sink(interval_s: float, stream: TextIO | None = None) -> ProgressSink:
    """A rich bar when `stream` (stderr by default) is a terminal, plain lines otherwise."""
    target = stream or sys.stderr
    if target.isatty():
        return RichProgressSink(target)
    return LogProgressSink(target, interval_s)


class DiskProgressMonitor:
    """Samples how much of an entry is on disk once a second and feeds a sink.

    `done_bytes()` is supplied by the caller (it knows what was complete before this run).
    `on_heartbeat` runs every `heartbeat_s` seconds, e.g. to refresh a space reservation.
    """

    def __init__(
        self,
        *,
        node: str,
        model: str,
        total_bytes: int,
        done_bytes: Callable[[], int],
        sink: ProgressSink,
        on_heartbeat: Callable[[], None] | None = None,
        heartbeat_s: float = 60.0,
        period_s: float = 1.0,
    ) -> None:
        self._node = node
        self._model = model
        self._total = total_bytes
        self._done_bytes = done_bytes
        self._sink = sink
        self._on_heartbeat = on_heartbeat
        self._heartbeat_s = heartbeat_s
        self._period_s = period_s
        self._rates = RateWindow()
        self._stop = threading.Event()
        self._started_at = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="staging-progress", daemon=True)

    def __enter__(self) -> DiskProgressMonitor:
        self._started_at = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sink.finish(self.sample(), ok=exc_type is None)

    def sample(self) -> ProgressSample:
        now = time.monotonic()
        done = min(self._total, self._done_bytes())
        self._rates.add(now, done)
        rate = self._rates.rate()
        return ProgressSample(
            node=self._node,
            model=self._model,
            done_bytes=done,
            total_bytes=self._total,
            elapsed_s=now - self._started_at,
            rate_bytes_per_s=rate,
            eta_s=eta_s(self._total - done, rate),
        )

    def _run(self) -> None:
        last_heartbeat = time.monotonic()
        while not self._stop.wait(self._period_s):
            self._sink.update(self.sample())
            if self._on_heartbeat and time.monotonic() - last_heartbeat >= self._heartbeat_s:
                last_heartbeat = time.monotonic()
                try:
                    self._on_heartbeat()
                except Exception:
                    # A missed heartbeat only makes the reservation look older; keep reporting.
                    logger.exception("staging heartbeat failed")
