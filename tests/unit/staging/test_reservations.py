"""Reservations: concurrent stagings cannot both take the last free space."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster.staging.cache_layout import CacheLayout
from cluster.staging.reservations import Holder, Reservation, ReservationBook
from cluster.staging.space_gate import SpaceGate
from cluster.staging.staging_config import StagingConfig
from cluster.staging.staging_errors import InsufficientDiskError


def config(tmp_path: Path, **overrides: object) -> StagingConfig:
    return StagingConfig.model_validate({"cache_dir": tmp_path, "reserve_gib": 0, **overrides})


def fixed_free(free: int):
    return lambda _path: free


def test_a_reservation_holds_back_space_from_other_stagings(tmp_path: Path):
    layout = CacheLayout(tmp_path)
    first = SpaceGate(layout, config(tmp_path), "n1", free_bytes=fixed_free(100))
    second = SpaceGate(
        layout,
        config(tmp_path),
        "n1",
        free_bytes=fixed_free(100),
        book=ReservationBook(
            layout,
            stale_after_s=600,
            holder=Holder(host=Holder.current().host, pid=1, pid_started="x"),
        ),
    )
    with first.reserve(entry="org--a--c", model="org/a", need_bytes=60, protected=frozenset()):
        # pid 1 with a made-up start time is not us: it reads the book as another process.
        judged = second.verdict(
            entry="org--b--c", model="org/b", need_bytes=60, protected=frozenset()
        )
        assert judged.reserved_by_others_bytes == 60
        assert not judged.fits
    judged = second.verdict(entry="org--b--c", model="org/b", need_bytes=60, protected=frozenset())
    assert judged.fits, "leaving the block releases the reservation"


def test_a_reservation_only_promises_what_its_staging_has_not_written_yet(tmp_path: Path):
    layout = CacheLayout(tmp_path)
    layout.ensure()
    book = ReservationBook(layout, stale_after_s=600)
    with book.transaction() as reservations:
        book.reserve(reservations, "org--a--c", 1000)
    entry_dir = layout.entry_dir("org--a--c")
    entry_dir.mkdir(parents=True)
    (entry_dir / "part").write_bytes(b"x" * 400)
    observer = ReservationBook(
        layout, stale_after_s=600, holder=Holder(host="other-host", pid=1, pid_started="")
    )
    with observer.transaction() as reservations:
        assert observer.reserved_by_others(reservations) == 600


def test_reservations_of_dead_processes_are_dropped(tmp_path: Path):
    layout = CacheLayout(tmp_path)
    layout.ensure()
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    dead = Reservation(
        entry="org--a--c",
        host=Holder.current().host,
        pid=int(finished.stdout),
        pid_started="1",
        need_bytes=10**12,
        on_disk_at_start_bytes=0,
        updated_at=time.time(),
    )
    layout.reservations_file.write_text(json.dumps([dead.__dict__]))
    assert ReservationBook(layout, stale_after_s=600).live() == []


def test_reservations_from_other_hosts_expire_when_not_refreshed(tmp_path: Path):
    layout = CacheLayout(tmp_path)
    layout.ensure()
    fresh = Reservation("org--a--c", "elsewhere", 42, "", 10, 0, time.time())
    stale = Reservation("org--b--c", "elsewhere", 43, "", 10, 0, time.time() - 3600)
    layout.reservations_file.write_text(json.dumps([fresh.__dict__, stale.__dict__]))
    assert [item.entry for item in ReservationBook(layout, stale_after_s=600).live()] == [
        "org--a--c"
    ]


def test_a_corrupt_reservations_file_promises_nothing(tmp_path: Path):
    layout = CacheLayout(tmp_path)
    layout.ensure()
    layout.reservations_file.write_text("{not json")
    assert ReservationBook(layout, stale_after_s=600).live() == []


def _race(cache_dir: str, entry: str, start: object, results: object) -> None:
    layout = CacheLayout(Path(cache_dir))
    gate = SpaceGate(layout, config(Path(cache_dir)), "n1", free_bytes=fixed_free(100))
    start.wait()  # type: ignore[attr-defined]
    try:
        with gate.reserve(entry=entry, model=entry, need_bytes=60, protected=frozenset()):
            results.put((entry, "admitted"))  # type: ignore[attr-defined]
            time.sleep(1.0)  # hold the promise while the other process checks
    except InsufficientDiskError as exc:
        results.put((entry, f"refused: {exc}"))  # type: ignore[attr-defined]


@pytest.mark.parametrize("attempt", range(3))
def test_two_processes_racing_for_the_last_space_cannot_both_be_admitted(
    tmp_path: Path, attempt: int
):
    context = multiprocessing.get_context("fork")
    start = context.Event()
    results = context.Queue()
    workers = [
        context.Process(target=_race, args=(str(tmp_path), f"org--m{i}--c", start, results))
        for i in range(2)
    ]
    for worker in workers:
        worker.start()
    start.set()
    outcomes = [results.get(timeout=30) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
    verdicts = sorted(outcome.split(":")[0] for _, outcome in outcomes)
    assert verdicts == ["admitted", "refused"], outcomes
    refusal = next(outcome for _, outcome in outcomes if outcome.startswith("refused"))
    assert "node n1" in refusal and "60 B" in refusal
