"""Entry states: ABSENT, STAGING, PARTIAL, STAGED; only STAGED is ever served."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from filelock import FileLock

from cluster.staging.cache_entries import (
    EntryState,
    being_staged,
    entry_state,
    list_entries,
    write_staged_marker,
)
from cluster.staging.cache_layout import CacheLayout

from .cache_builder import hub_manifest, make_entry


def test_an_entry_without_a_directory_is_absent(tmp_path: Path):
    assert entry_state(CacheLayout(tmp_path), "org--m--cccccccccccc") is EntryState.ABSENT


def test_files_without_the_staged_marker_are_partial(tmp_path: Path):
    layout = CacheLayout(tmp_path)
    name = make_entry(layout, "org/m", {"w.safetensors": 10}, staged=False)
    assert entry_state(layout, name) is EntryState.PARTIAL


def test_a_marker_plus_every_file_at_its_size_is_staged(tmp_path: Path):
    layout = CacheLayout(tmp_path)
    name = make_entry(layout, "org/m", {"w.safetensors": 10})
    assert entry_state(layout, name) is EntryState.STAGED


def test_a_staged_entry_that_lost_a_file_is_partial_again(tmp_path: Path):
    layout = CacheLayout(tmp_path)
    name = make_entry(layout, "org/m", {"w.safetensors": 10, "config.json": 2})
    (layout.entry_dir(name) / "config.json").unlink()
    assert entry_state(layout, name) is EntryState.PARTIAL


def test_a_marker_written_for_another_manifest_does_not_vouch(tmp_path: Path):
    layout = CacheLayout(tmp_path)
    name = make_entry(layout, "org/m", {"w.safetensors": 10}, staged=False)
    other = hub_manifest("org/m", {"w.safetensors": 10, "extra.json": 1})
    write_staged_marker(layout.entry_dir(name), other, node="n1")
    assert entry_state(layout, name) is EntryState.PARTIAL


def test_an_entry_whose_lock_is_held_is_staging(tmp_path: Path):
    layout = CacheLayout(tmp_path)
    name = make_entry(layout, "org/m", {"w.safetensors": 10}, staged=False)
    with FileLock(layout.entry_lock(name)):
        assert entry_state(layout, name) is EntryState.STAGING


def test_listing_reports_size_expected_size_source_and_last_use(tmp_path: Path):
    layout = CacheLayout(tmp_path)
    make_entry(layout, "org/m", {"w.safetensors": 10}, last_used_epoch_s=1_700_000_000)
    (entry,) = list_entries(layout)
    assert entry.expected_bytes == 10
    assert entry.size_bytes >= 10
    assert entry.source == "org/m"
    assert entry.last_used is not None and entry.last_used.year == 2023
    assert entry.to_json()["state"] == "staged"


def test_listing_while_another_process_lists_still_sees_the_entry_staged(tmp_path: Path):
    layout = CacheLayout(tmp_path)
    name = make_entry(layout, "org/m", {"w.safetensors": 10})
    held = threading.Event()

    def list_briefly() -> None:
        with FileLock(layout.entry_lock(name)):
            held.set()
            time.sleep(0.05)  # longer than a listing holds the lock, far shorter than a staging

    lister = threading.Thread(target=list_briefly)
    lister.start()
    assert held.wait(5)
    assert entry_state(layout, name) is EntryState.STAGED
    lister.join()


def test_many_listings_at_once_never_see_a_staged_entry_as_staging(tmp_path: Path):
    layout = CacheLayout(tmp_path)
    name = make_entry(layout, "org/m", {"w.safetensors": 10})
    states: list[EntryState] = []

    def list_repeatedly() -> None:
        for _ in range(20):
            states.append(entry_state(layout, name))

    listers = [threading.Thread(target=list_repeatedly) for _ in range(4)]
    for lister in listers:
        lister.start()
    for lister in listers:
        lister.join()
    assert set(states) == {EntryState.STAGED}


def test_a_stall_between_two_attempts_does_not_read_a_listing_as_staging(tmp_path: Path):
    # A garbage collection or a loaded machine stalls the whole process, the other listing
    # (still holding the lock) included. The probe counts attempts, not seconds, so a stall
    # longer than its whole wait does not use the wait up.
    layout = CacheLayout(tmp_path)
    name = make_entry(layout, "org/m", {"w.safetensors": 10})
    held, release = threading.Event(), threading.Event()

    def list_slowly() -> None:
        with FileLock(layout.entry_lock(name)):
            held.set()
            release.wait(5)

    lister = threading.Thread(target=list_slowly)
    lister.start()
    assert held.wait(5)

    def stalled(seconds: float) -> None:
        time.sleep(0.3)  # longer than the probe's whole wait
        release.set()
        lister.join()

    assert being_staged(layout.entry_lock(name), pause=stalled) is False
