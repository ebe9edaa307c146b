"""Parking by vLLM's sleep mode (policies/sleep_mode.py): refused where the platform has no
sleep mode, and at level 1 wherever a node's host memory cannot pin the weights beside the
models already asleep there."""

from __future__ import annotations

import pytest

from policies.inventory import ClusterInventory, GpuProfile, gpu_profile
from policies.reasons import ReasonCode
from policies.sleep_mode import (
    PinnedWeights,
    level_one_refusals,
    pinned_per_node,
    sleep_mode_refusal,
)
from policies.units import GIB

pytestmark = pytest.mark.unit

# The story's box: one node of 8 RTX PRO 6000 and 2 TB of host memory.
STORY = ClusterInventory.homogeneous("rtx-pro-6000", 1, 8, host_ram_gib=2048)
KIMI_TP8 = pinned_per_node("kimi-k2.5", int(71.8 * GIB), {"node-0": 8})
MINIMAX_2X_TP4 = pinned_per_node("minimax-m2.5", int(53.6 * GIB), {"node-0": 8})


def test_the_cpu_engine_has_no_sleep_mode_and_the_refusal_names_the_platform() -> None:
    reason = sleep_mode_refusal(GpuProfile.cpu_standin(4.0))
    assert reason is not None and reason.code == ReasonCode.SLEEP_MODE_UNAVAILABLE
    assert "cpu-standin" in reason.message and "park_mode unload" in reason.message
    assert sleep_mode_refusal(gpu_profile("rtx-pro-6000")) is None
    assert sleep_mode_refusal(gpu_profile("h100")) is None


def test_both_story_models_asleep_at_level_one_fit_the_story_box() -> None:
    assert level_one_refusals(STORY.nodes, KIMI_TP8, asleep=MINIMAX_2X_TP4) == ()
    assert level_one_refusals(STORY.nodes, MINIMAX_2X_TP4, asleep=KIMI_TP8) == ()


def test_a_level_one_copy_that_does_not_fit_beside_the_sleepers_is_refused_with_figures() -> None:
    small_host = ClusterInventory.homogeneous("rtx-pro-6000", 1, 8, host_ram_gib=768)
    (reason,) = level_one_refusals(small_host.nodes, KIMI_TP8, asleep=MINIMAX_2X_TP4)
    assert reason.code == ReasonCode.SLEEP_HOST_MEMORY
    # 8 x 71.8 GiB wanted, 428.8 asleep, 691.2 of 768 GiB allowed (10 % kept).
    for figure in ("574.4 GiB", "428.8 GiB", "691.2 GiB", "768.0 GiB", "sleep_level 2"):
        assert figure in reason.message


def test_a_models_own_earlier_copy_is_not_counted_twice() -> None:
    tight = ClusterInventory.homogeneous("rtx-pro-6000", 1, 8, host_ram_gib=700)
    assert level_one_refusals(tight.nodes, KIMI_TP8, asleep=KIMI_TP8) == ()


def test_a_node_whose_host_memory_is_unknown_is_refused_rather_than_pinned_blind() -> None:
    unknown = ClusterInventory.homogeneous("h100", 1, 8)
    (reason,) = level_one_refusals(unknown.nodes, KIMI_TP8, asleep=())
    assert reason.code == ReasonCode.SLEEP_HOST_MEMORY and "unknown" in reason.message


def test_each_node_pins_the_weights_of_the_ranks_it_holds() -> None:
    claims = pinned_per_node("m", 10 * GIB, {"node-1": 4, "node-0": 4, "node-2": 0})
    assert claims == (
        PinnedWeights("m", "node-0", 40 * GIB),
        PinnedWeights("m", "node-1", 40 * GIB),
    )
