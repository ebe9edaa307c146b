"""Which way a parked model comes back and how long it should take (policies/wake_paths.py):
predicted from the bytes each path moves over its link, corrected by the model's own past
wakes, the cheapest path open to how it was parked."""

from __future__ import annotations

import pytest

from policies.inventory import gpu_profile
from policies.sleep_mode import SleepLevel
from policies.units import GIB
from policies.wake_paths import (
    PastWake,
    WakeLinks,
    WakePath,
    WakeWork,
    choose,
    correction,
    estimate,
    paths_for,
)

pytestmark = pytest.mark.unit

LINKS = WakeLinks(host_to_gpu_gbps=gpu_profile("rtx-pro-6000").host_link_gbps)
KIMI_TP8 = WakeWork(weights_per_gpu_bytes=int(71.8 * GIB), busiest_node_bytes=int(8 * 71.8 * GIB))
MINIMAX_TP4 = WakeWork(int(53.6 * GIB), int(4 * 53.6 * GIB))


def test_a_level_one_wake_of_the_story_models_takes_seconds_not_a_cold_start() -> None:
    kimi = estimate(WakePath.LEVEL_1, KIMI_TP8, LINKS)
    minimax = estimate(WakePath.LEVEL_1, MINIMAX_TP4, LINKS)
    # 617 GB through the node's DRAM at 200 GB/s, plus the wake itself: the published
    # level-1 wakes are 3-5 s.
    assert 3.0 < kimi.predicted_s < 5.0
    assert 1.5 < minimax.predicted_s < kimi.predicted_s
    level_2 = estimate(WakePath.LEVEL_2, MINIMAX_TP4, LINKS).predicted_s
    cold = estimate(WakePath.COLD_START, MINIMAX_TP4, LINKS).predicted_s
    assert minimax.predicted_s < level_2 < cold


def test_weights_out_of_the_page_cache_are_read_at_the_disk_rate() -> None:
    warm = estimate(WakePath.LEVEL_2, KIMI_TP8, LINKS).predicted_s
    cold_cache = WakeWork(KIMI_TP8.weights_per_gpu_bytes, KIMI_TP8.busiest_node_bytes, False)
    assert estimate(WakePath.LEVEL_2, cold_cache, LINKS).predicted_s > warm * 3


def test_the_paths_open_to_a_model_follow_how_it_was_parked() -> None:
    assert paths_for(SleepLevel.ONE) == (WakePath.LEVEL_1, WakePath.COLD_START)
    assert paths_for(SleepLevel.TWO) == (WakePath.LEVEL_2, WakePath.COLD_START)
    assert paths_for(None) == (WakePath.COLD_START,)
    assert choose(SleepLevel.ONE, MINIMAX_TP4, LINKS).path is WakePath.LEVEL_1
    assert choose(SleepLevel.TWO, MINIMAX_TP4, LINKS).path is WakePath.LEVEL_2
    assert choose(None, MINIMAX_TP4, LINKS).path is WakePath.COLD_START


def test_past_wakes_correct_the_prediction_by_their_median_ratio() -> None:
    raw = estimate(WakePath.LEVEL_1, MINIMAX_TP4, LINKS).physics_s
    history = [
        PastWake(WakePath.LEVEL_1, raw, raw * 1.5),
        PastWake(WakePath.LEVEL_1, raw, raw * 2.0),
        PastWake(WakePath.LEVEL_1, raw, raw * 1.4),
        PastWake(WakePath.COLD_START, 40.0, 400.0),  # another path: not counted
    ]
    assert correction(WakePath.LEVEL_1, history) == pytest.approx(1.5)
    corrected = estimate(WakePath.LEVEL_1, MINIMAX_TP4, LINKS, history)
    assert corrected.predicted_s == pytest.approx(raw * 1.5)
    assert correction(WakePath.LEVEL_2, history) == 1.0, "no wake on that path yet"


def test_a_cold_start_is_the_models_own_last_start_once_known() -> None:
    history = [PastWake(WakePath.COLD_START, 40.0, 80.0)]
    own = estimate(WakePath.COLD_START, MINIMAX_TP4, LINKS, history, last_cold_start_s=75.0)
    assert own.predicted_s == 75.0 and own.correction == 1.0


def test_a_slow_host_link_can_make_a_cold_start_the_cheaper_path() -> None:
    crawling = WakeLinks(host_to_gpu_gbps=0.5, host_memory_gbps=0.5)
    chosen = choose(SleepLevel.ONE, MINIMAX_TP4, crawling, last_cold_start_s=75.0)
    assert chosen.path is WakePath.COLD_START and chosen.predicted_s == 75.0
