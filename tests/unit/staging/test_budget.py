"""The disk rule: what is missing must fit in free space minus reserve minus promises."""

from __future__ import annotations

import pytest

from cluster.staging.progress import format_bytes, format_duration
from cluster.staging.space_gate import judge_disk

GIB = 1024**3


def verdict(**overrides: int):
    values = {
        "need_bytes": 100 * GIB,
        "free_bytes": 150 * GIB,
        "reserve_bytes": 20 * GIB,
        "reserved_by_others_bytes": 0,
    }
    values.update(overrides)
    return judge_disk(node="10.0.0.5/ab12cd34", model="org/m", cache_dir="/cache", **values)


def test_a_model_fits_when_missing_bytes_are_at_most_free_minus_reserve_minus_promises():
    assert verdict().fits
    assert verdict(need_bytes=130 * GIB).fits
    assert not verdict(need_bytes=130 * GIB + 1).fits


def test_space_promised_to_other_stagings_counts_as_used():
    assert not verdict(reserved_by_others_bytes=40 * GIB).fits


def test_a_refusal_names_the_node_the_need_and_the_free_space():
    message = verdict(need_bytes=200 * GIB).describe()
    assert "10.0.0.5/ab12cd34" in message
    assert "200.0 GiB" in message
    assert "150.0 GiB free" in message
    assert "20.0 GiB reserve" in message


def test_evictable_space_is_reported_but_does_not_make_the_model_fit_by_itself():
    judged = verdict(need_bytes=140 * GIB, evictable_bytes=50 * GIB)
    assert not judged.fits
    assert judged.fits_with_eviction
    assert judged.shortfall_bytes == 10 * GIB
    assert "could free 50.0 GiB" in judged.describe()


def test_usable_space_never_goes_negative():
    assert verdict(free_bytes=GIB).usable_bytes == 0


def test_negative_byte_counts_are_refused():
    with pytest.raises(ValueError):
        verdict(need_bytes=-1)


def test_units_read_naturally():
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(214.3 * GIB) == "214.3 GiB"
    assert format_duration(3725) == "1h02m"
    assert format_duration(245) == "4m05s"
    assert format_duration(None) == "?"
