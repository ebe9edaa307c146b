"""Layouts: sizes, MoE split and their names."""

from __future__ import annotations

import pytest

from policies.layout import Layout


def test_layout_counts_gpus_per_replica_and_in_total() -> None:
    layout = Layout(tp=4, pp=2, dp=3)
    assert layout.gpus_per_replica == 8
    assert layout.total_gpus == 24


def test_layout_prints_like_tp4xpp1xdp2_plus_ep() -> None:
    assert str(Layout(tp=4, dp=2, ep=True)) == "TP4xPP1xDP2+EP"
    assert str(Layout(tp=8)) == "TP8xPP1xDP1"


def test_experts_are_cut_tp_times_dp_ways_without_ep_and_not_at_all_with_it() -> None:
    assert Layout(tp=4, dp=2).moe_split == 8
    assert Layout(tp=4, dp=2, ep=True).moe_split == 1
    assert Layout(tp=4, dp=2, ep=True).moe_group_size == 8


@pytest.mark.parametrize(("tp", "pp", "dp"), [(0, 1, 1), (1, -1, 1), (1, 1, 0)])
def test_layout_sizes_must_be_positive(tp: int, pp: int, dp: int) -> None:
    with pytest.raises(ValueError, match="must be a positive integer"):
        Layout(tp=tp, pp=pp, dp=dp)
