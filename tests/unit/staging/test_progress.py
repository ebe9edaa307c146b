"""Progress: bytes, rate and ETA per node, as plain lines when nobody watches a terminal."""

from __future__ import annotations

import io

from cluster.staging.progress import (
    DiskProgressMonitor,
    LogProgressSink,
    ProgressSample,
    RateWindow,
    default_sink,
    eta_s,
)
from tests.support.waiting import wait_until

MIB = 1024**2


def sample(done: int, rate: float | None = 10 * MIB, eta: float | None = 9.0) -> ProgressSample:
    return ProgressSample("n1", "org/m", done, 100 * MIB, 1.0, rate, eta)


def test_the_rate_comes_from_the_recent_window():
    window = RateWindow(window_s=10)
    window.add(0.0, 0)
    assert window.rate() is None
    done = 0
    for second in range(1, 41):
        done += (50 if second <= 10 else 10) * MIB  # a fast first 10 s, then 10 MiB/s
        window.add(float(second), done)
    assert window.rate() == 10 * MIB


def test_the_eta_is_remaining_over_rate_and_unknown_without_a_rate():
    assert eta_s(100, 10.0) == 10.0
    assert eta_s(0, None) == 0.0
    assert eta_s(100, None) is None
    assert eta_s(100, 0.0) is None


def test_a_progress_line_names_node_model_bytes_rate_and_eta():
    line = sample(25 * MIB).describe()
    assert line == "staging org/m on node n1: 25.0 MiB / 100.0 MiB (25.0%), 10.0 MiB/s, ETA 9s"


def test_plain_lines_are_written_at_most_once_per_interval_plus_a_final_one():
    stream = io.StringIO()
    sink = LogProgressSink(stream, interval_s=3600)
    sink.update(sample(1))
    sink.update(sample(2))
    sink.finish(sample(100 * MIB, eta=0.0), ok=True)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[-1].endswith("[done after 1s]")


def test_without_a_terminal_progress_goes_to_plain_lines():
    assert isinstance(default_sink(10.0, io.StringIO()), LogProgressSink)


def test_the_monitor_reports_what_lands_on_disk_and_a_final_sample():
    stream = io.StringIO()
    landed = [0]
    beats: list[int] = []
    monitor = DiskProgressMonitor(
        node="n1",
        model="org/m",
        total_bytes=100,
        done_bytes=lambda: landed[0],
        sink=LogProgressSink(stream, interval_s=0.0),
        on_heartbeat=lambda: beats.append(1),
        heartbeat_s=0.0,
        period_s=0.01,
    )
    with monitor:
        landed[0] = 100
        wait_until(lambda: beats, 10, 0.01, message="the heartbeat never ran while active")
    assert "100 B / 100 B (100.0%)" in stream.getvalue().splitlines()[-1]
