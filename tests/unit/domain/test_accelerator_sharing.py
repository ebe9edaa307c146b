"""Two engines on one set of accelerators (domain/accelerator_sharing.py): Ray counts half an
accelerator per rank of a sleep-mode engine; Switchyard keeps at most one engine awake per
accelerator."""

from __future__ import annotations

import pytest

from domain.accelerator_sharing import Tenant, awake_beside, free_for, node_tenants

pytestmark = pytest.mark.unit

KIMI_AWAKE = Tenant("kimi", 8, shared=True, awake=True)
KIMI_ASLEEP = Tenant("kimi", 8, shared=True, awake=False)
MINIMAX = Tenant("minimax", 8, shared=True, awake=True)


def test_a_shared_engine_fits_beside_a_sleeping_one_but_not_beside_an_awake_one() -> None:
    assert free_for(8, [KIMI_ASLEEP], shared=True) == 8
    assert free_for(8, [KIMI_AWAKE], shared=True) == 0
    assert free_for(8, [KIMI_AWAKE], shared=True, asleep_after=frozenset({"kimi"})) == 8


def test_no_accelerator_takes_a_third_engine_awake_or_asleep() -> None:
    assert free_for(8, [KIMI_ASLEEP, Tenant("minimax", 8, True, False)], shared=True) == 0
    # Half the node taken by a whole-accelerator engine: the halves left are what count.
    assert free_for(8, [Tenant("pinned", 4, False, True), KIMI_ASLEEP], shared=True) == 0
    assert free_for(8, [Tenant("pinned", 4, False, True)], shared=True) == 4


def test_a_whole_accelerator_engine_counts_two_halves_as_one_accelerator() -> None:
    assert free_for(8, [Tenant("small", 3, True, False)], shared=False) == 6
    assert free_for(8, [KIMI_ASLEEP], shared=False) == 4


def test_the_engines_awake_beside_a_wake_sleep_least_recently_used_first() -> None:
    half = [Tenant("a", 4, True, True), Tenant("b", 4, True, True), KIMI_ASLEEP]
    assert awake_beside(8, half, KIMI_ASLEEP, evictable=["b", "a"]) == ("b", "a")
    assert awake_beside(8, [MINIMAX, KIMI_ASLEEP], KIMI_ASLEEP, ["minimax"]) == ("minimax",)
    assert awake_beside(8, [KIMI_ASLEEP], KIMI_ASLEEP, evictable=[]) == ()
    # An engine that may not be parked (an `always` model) leaves no room.
    assert awake_beside(8, [MINIMAX, KIMI_ASLEEP], KIMI_ASLEEP, evictable=[]) is None


def test_each_node_lists_the_engines_holding_its_accelerators() -> None:
    tenants = node_tenants(
        {"kimi": {"n1": 8}, "minimax": {"n1": 4, "n2": 4}, "gone": {}},
        shared={"kimi": True, "minimax": True},
        awake={"kimi": False},
    )
    assert tenants == {
        "n1": [KIMI_ASLEEP, Tenant("minimax", 4, True, True)],
        "n2": [Tenant("minimax", 4, True, True)],
    }
