"""Eviction: LRU, only when it makes the model fit, never a serving, pinned or busy model."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from filelock import FileLock

from cluster.staging.cache_entries import EntryState, list_entries, pin, read_pins, unpin
from cluster.staging.cache_layout import CacheLayout
from cluster.staging.eviction import (
    EvictionRefused,
    choose_evictions,
    evict_entry,
    eviction_candidates,
)
from cluster.staging.integrity import bytes_on_disk
from cluster.staging.space_gate import SpaceGate
from cluster.staging.staging_config import StagingConfig
from cluster.staging.staging_errors import InsufficientDiskError

from .cache_builder import entry_exists, make_entry


@pytest.fixture
def layout(tmp_path: Path) -> CacheLayout:
    return CacheLayout(tmp_path)


@pytest.fixture
def three_models(layout: CacheLayout) -> tuple[str, str, str]:
    oldest = make_entry(layout, "org/oldest", {"w.safetensors": 300}, last_used_epoch_s=1_000)
    middle = make_entry(layout, "org/middle", {"w.safetensors": 300}, last_used_epoch_s=2_000)
    newest = make_entry(layout, "org/newest", {"w.safetensors": 300}, last_used_epoch_s=3_000)
    return oldest, middle, newest


def gate(layout: CacheLayout, free: int, allow_eviction: bool = True) -> SpaceGate:
    """A gate on a pretend volume that has `free` bytes left now and gains what is deleted."""
    capacity = bytes_on_disk(layout.root) + free
    config = StagingConfig(cache_dir=layout.root, reserve_gib=0, allow_eviction=allow_eviction)
    return SpaceGate(layout, config, "n1", free_bytes=lambda path: capacity - bytes_on_disk(path))


def test_candidates_are_least_recently_used_first(layout, three_models):
    oldest, middle, newest = three_models
    names = [entry.name for entry in eviction_candidates(list_entries(layout), frozenset())]
    assert names == [oldest, middle, newest]


def test_serving_pinned_and_busy_entries_are_never_candidates(layout, three_models):
    oldest, middle, newest = three_models
    pin(layout, middle, "pending swap")
    with FileLock(layout.entry_lock(newest)):
        candidates = eviction_candidates(list_entries(layout), frozenset({oldest}))
    assert candidates == []


def test_the_shortest_lru_prefix_that_frees_enough_is_chosen(layout, three_models):
    candidates = eviction_candidates(list_entries(layout), frozenset())
    chosen = choose_evictions(candidates, candidates[0].size_bytes + 1)
    assert chosen is not None
    assert [entry.name for entry in chosen] == [three_models[0], three_models[1]]
    assert choose_evictions(candidates, 0) == []


def test_nothing_is_chosen_when_even_everything_would_not_be_enough(layout, three_models):
    candidates = eviction_candidates(list_entries(layout), frozenset())
    assert choose_evictions(candidates, 10_000) is None


def test_staging_evicts_lru_models_only_when_needed_and_spares_the_serving_one(
    layout, three_models
):
    oldest, middle, newest = three_models
    serving = frozenset({oldest})
    with gate(layout, free=100).reserve(
        entry="org--new--c", model="org/new", need_bytes=350, protected=serving
    ) as verdict:
        assert verdict.fits
    assert entry_exists(layout, oldest), "the serving model survives although it is the LRU one"
    assert not entry_exists(layout, middle)
    assert entry_exists(layout, newest), "one eviction was enough"


def test_no_eviction_happens_when_the_model_fits_already(layout, three_models):
    with gate(layout, free=10_000).reserve(
        entry="org--new--c", model="org/new", need_bytes=350, protected=frozenset()
    ):
        pass
    assert all(entry_exists(layout, name) for name in three_models)


def test_a_refusal_deletes_nothing_when_eviction_could_not_make_room(layout, three_models):
    refused = gate(layout, free=100)
    with (
        pytest.raises(InsufficientDiskError, match="could free"),
        refused.reserve(
            entry="org--new--c", model="org/new", need_bytes=5_000, protected=frozenset()
        ),
    ):
        pass
    assert all(entry_exists(layout, name) for name in three_models)


def test_eviction_is_off_unless_the_config_allows_it(layout, three_models):
    refused = gate(layout, free=100, allow_eviction=False)
    with (
        pytest.raises(InsufficientDiskError),
        refused.reserve(
            entry="org--new--c", model="org/new", need_bytes=350, protected=frozenset()
        ),
    ):
        pass
    assert all(entry_exists(layout, name) for name in three_models)


def test_evicting_by_hand_refuses_protected_pinned_and_busy_entries(layout, three_models):
    oldest, middle, newest = three_models
    with pytest.raises(EvictionRefused, match="serving"):
        evict_entry(layout, oldest, frozenset({oldest}))
    pin(layout, middle, "by hand")
    with pytest.raises(EvictionRefused, match="pinned"):
        evict_entry(layout, middle, frozenset())
    with FileLock(layout.entry_lock(newest)), pytest.raises(EvictionRefused, match="staged"):
        evict_entry(layout, newest, frozenset())
    assert all(entry_exists(layout, name) for name in three_models)


def test_a_listing_in_progress_only_delays_an_eviction(layout, three_models):
    listing = threading.Event()

    def list_slowly() -> None:
        with FileLock(layout.entry_lock(three_models[0])):
            listing.set()
            time.sleep(0.3)

    lister = threading.Thread(target=list_slowly)
    lister.start()
    assert listing.wait(5)
    assert evict_entry(layout, three_models[0], frozenset()) > 0
    lister.join()
    assert not entry_exists(layout, three_models[0])


def test_evicting_an_unprotected_entry_frees_its_bytes(layout, three_models):
    freed = evict_entry(layout, three_models[2], frozenset())
    assert freed >= 300
    assert not entry_exists(layout, three_models[2])


def test_pins_are_kept_in_a_file_and_can_be_removed(layout, three_models):
    pin(layout, three_models[0], "swap 7")
    assert read_pins(layout) == frozenset({three_models[0]})
    assert unpin(layout, three_models[0])
    assert not unpin(layout, three_models[0])
    assert read_pins(layout) == frozenset()


def test_partial_entries_count_as_candidates_before_any_staged_model(layout, three_models):
    partial = make_entry(
        layout, "org/partial", {"w.safetensors": 300}, staged=False, written={"w.safetensors": 10}
    )
    entries = {entry.name: entry for entry in list_entries(layout)}
    assert entries[partial].state is EntryState.PARTIAL
    first = eviction_candidates(entries.values(), frozenset())[0]
    assert first.name == partial
