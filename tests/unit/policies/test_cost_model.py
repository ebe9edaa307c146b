"""The decode cost model ranks layouts by their single-stream ceiling."""

from __future__ import annotations

import dataclasses
from math import comb

import pytest

from policies.checkpoint.model_spec import ModelSpec
from policies.checkpoint.parameters import model_bytes
from policies.cost_model import decode_cost, expected_busiest_rank_experts
from policies.inventory import gpu_profile
from policies.layout import Layout
from policies.memory import KvCacheDtype


def _tok_s(spec: ModelSpec, layout: Layout, gpu: str, gpus_per_node: int = 8) -> float:
    return decode_cost(
        spec,
        model_bytes(spec),
        layout,
        gpu_profile(gpu),
        kv_cache_dtype=KvCacheDtype.AUTO,
        gpus_per_node=gpus_per_node,
    ).tokens_per_second


def test_ceilings_sit_above_what_the_field_measured(kimi: ModelSpec, minimax: ModelSpec) -> None:
    # Field: Kimi-K2.5 TP8 ~61 tok/s, MiniMax-M2.5 TP4+EP ~84 tok/s, single stream, PCIe box.
    kimi_tp8 = _tok_s(kimi, Layout(tp=8), "rtx-pro-6000")
    minimax_tp4 = _tok_s(minimax, Layout(tp=4, ep=True), "rtx-pro-6000")
    assert 61 < kimi_tp8 <= 61 * 2
    assert 84 < minimax_tp4 <= 84 * 2
    assert minimax_tp4 > kimi_tp8


def test_a_qk_norm_across_heads_costs_one_more_all_reduce_per_layer_under_tp(
    minimax: ModelSpec,
) -> None:
    # vLLM's MiniMaxText01RMSNormTP.forward_qk all-reduces each token's q/k variance.
    per_head = dataclasses.replace(
        minimax,
        attention=dataclasses.replace(minimax.attention, tp_qk_norm_all_reduce=False),
    )
    gpu = gpu_profile("rtx-pro-6000")

    def collectives(spec: ModelSpec, layout: Layout) -> float:
        return decode_cost(
            spec,
            model_bytes(spec),
            layout,
            gpu,
            kv_cache_dtype=KvCacheDtype.AUTO,
            gpus_per_node=8,
        ).collectives_s

    assert minimax.attention.tp_qk_norm_all_reduce
    tp4 = Layout(tp=4)
    assert collectives(minimax, tp4) / collectives(per_head, tp4) > 1.45
    assert collectives(minimax, Layout(tp=1)) == collectives(per_head, Layout(tp=1)) == 0


def test_on_pcie_high_tp_mla_loses_to_fewer_tp_ranks_with_pipeline_stages(
    kimi: ModelSpec,
) -> None:
    assert _tok_s(kimi, Layout(tp=4, pp=2), "rtx-pro-6000") > _tok_s(
        kimi, Layout(tp=8), "rtx-pro-6000"
    )


def test_on_nvlink_all_reduce_is_cheap_so_tp8_wins(kimi: ModelSpec) -> None:
    assert _tok_s(kimi, Layout(tp=8), "h200") > _tok_s(kimi, Layout(tp=4, pp=2), "h200")


def test_more_memory_bandwidth_means_a_higher_ceiling(minimax: ModelSpec) -> None:
    gpu = gpu_profile("h100")
    faster = dataclasses.replace(gpu, hbm_bandwidth_gbps=gpu.hbm_bandwidth_gbps * 2)
    slow = decode_cost(
        minimax,
        model_bytes(minimax),
        Layout(tp=4),
        gpu,
        kv_cache_dtype=KvCacheDtype.AUTO,
        gpus_per_node=8,
    )
    fast = decode_cost(
        minimax,
        model_bytes(minimax),
        Layout(tp=4),
        faster,
        kv_cache_dtype=KvCacheDtype.AUTO,
        gpus_per_node=8,
    )
    assert fast.tokens_per_second > slow.tokens_per_second
    assert fast.collectives_s == slow.collectives_s


def test_tp1_has_no_collectives_and_pp_pays_hand_offs(minimax: ModelSpec) -> None:
    one = decode_cost(
        minimax,
        model_bytes(minimax),
        Layout(tp=1),
        gpu_profile("h200"),
        kv_cache_dtype=KvCacheDtype.AUTO,
        gpus_per_node=8,
    )
    piped = decode_cost(
        minimax,
        model_bytes(minimax),
        Layout(tp=1, pp=4),
        gpu_profile("h200"),
        kv_cache_dtype=KvCacheDtype.AUTO,
        gpus_per_node=8,
    )
    assert one.collectives_s == 0
    assert one.handoff_s == 0
    assert piped.handoff_s > 0


def test_with_expert_parallel_a_token_waits_for_the_rank_holding_most_of_its_experts() -> None:
    # 2 of 16 experts over 2 ranks: both on one rank with probability 2 C(8,2) / C(16,2).
    assert abs(expected_busiest_rank_experts(16, 2, 2) - (1 + 56 / 120)) < 1e-12
    # Every expert on its own rank, or all on one rank: no chance involved.
    assert expected_busiest_rank_experts(8, 8, 4) == 2
    assert expected_busiest_rank_experts(256, 8, 1) == 8
    # More ranks than experts: each rank holds one expert at most.
    assert expected_busiest_rank_experts(8, 1, 12) == 1
    assert expected_busiest_rank_experts(8, 3, 12) == 1
    # Uneven: 5 experts on 2 ranks (3 and 2), both picked of 2 on one rank in 4 of 10 ways.
    assert abs(expected_busiest_rank_experts(5, 2, 2) - 1.4) < 1e-12
    # MiniMax-M2.5 (8 of 256) on TP4 + EP: 3.5 experts on the busiest rank, not 8 / 4.
    assert 3.4 < expected_busiest_rank_experts(256, 8, 4) < 3.6


def _busiest_rank_one_rank_at_a_time(num_experts: int, k: int, ranks: int) -> float:
    """The same expectation, counted rank by rank (the definition, slow for many ranks)."""
    base, extra = divmod(num_experts, ranks)
    held = [base + 1] * extra + [base] * (ranks - extra)
    expected = 0.0
    for m in range(1, k + 1):
        ways = [1] + [0] * k
        for size in held:
            ways = [
                sum(ways[j - c] * comb(size, c) for c in range(min(m - 1, j, size) + 1))
                for j in range(k + 1)
            ]
        expected += 1.0 - ways[k] / comb(num_experts, k)
    return expected


@pytest.mark.parametrize(
    ("experts", "k", "ranks"), [(256, 8, 3), (384, 8, 7), (256, 8, 64), (10, 3, 4), (160, 6, 96)]
)
def test_the_busiest_rank_is_counted_by_rank_sizes_as_it_is_rank_by_rank(
    experts: int, k: int, ranks: int
) -> None:
    fast = expected_busiest_rank_experts(experts, k, ranks)
    assert abs(fast - _busiest_rank_one_rank_at_a_time(experts, k, ranks)) < 1e-12
    # Thousands of EP ranks (a plan over 512 nodes of 8) are counted, not refused.
    assert expected_busiest_rank_experts(384, 8, 4096) == 1.0


def test_expert_parallel_prices_the_busiest_rank_above_an_even_split(minimax: ModelSpec) -> None:
    def weights_s(layout: Layout) -> float:
        return decode_cost(
            minimax,
            model_bytes(minimax),
            layout,
            gpu_profile("rtx-pro-6000"),
            kv_cache_dtype=KvCacheDtype.AUTO,
            gpus_per_node=8,
        ).weights_s

    # Without EP each rank reads a quarter of each of the 8 experts; with EP whole experts,
    # as many as the busiest rank got.
    assert weights_s(Layout(tp=4, ep=True)) > weights_s(Layout(tp=4))
