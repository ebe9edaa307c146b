"""One test (or a few) per layout rule, against the real configs and vLLM's messages."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from policies.checkpoint.model_spec import ModelSpec
from policies.inventory import Interconnect
from policies.layout import Layout
from policies.layout_rules import (
    MODEL_RULES,
    attention_heads_divide_by_tp,
    check_model_rules,
    expert_parallel_needs_experts,
    fp8_blocks_align,
    kv_heads_split_or_replicate,
    pipeline_parallel_supported,
    pipeline_stages_have_layers,
    tensor_parallel_within_node,
)
from policies.reasons import ReasonCode

SpecOf = Callable[[str], ModelSpec]


def test_heads_must_divide_by_tp(minimax: ModelSpec) -> None:
    assert attention_heads_divide_by_tp(minimax, Layout(tp=8)) is None
    reason = attention_heads_divide_by_tp(minimax, Layout(tp=5))
    assert reason is not None
    assert reason.code == ReasonCode.HEADS_NOT_DIVISIBLE
    assert "(48) must be divisible by tensor parallel size (5)" in reason.message


def test_kv_heads_are_split_or_replicated(minimax: ModelSpec) -> None:
    assert kv_heads_split_or_replicate(minimax, Layout(tp=4)) is None
    assert kv_heads_split_or_replicate(minimax, Layout(tp=16)) is None
    reason = kv_heads_split_or_replicate(minimax, Layout(tp=6))
    assert reason is not None
    assert reason.code == ReasonCode.KV_HEADS_NOT_DIVISIBLE


def test_kv_head_rule_does_not_apply_to_mla(kimi: ModelSpec) -> None:
    assert kv_heads_split_or_replicate(kimi, Layout(tp=48)) is None


def test_minimax_pure_tp8_breaks_fp8_blocks_with_vllms_192_over_128_message(
    minimax: ModelSpec,
) -> None:
    reason = fp8_blocks_align(minimax, Layout(tp=8))
    assert reason is not None
    assert reason.code == ReasonCode.FP8_BLOCK_MISALIGNED
    assert (
        "The output_size of gate's and up's weight = 192 is not divisible by weight "
        "quantization block_n = 128" in reason.message
    )


@pytest.mark.parametrize(
    ("layout", "ok"),
    [
        (Layout(tp=1), True),
        (Layout(tp=2), True),
        (Layout(tp=4), True),
        (Layout(tp=8), False),
        (Layout(tp=8, ep=True), True),
        (Layout(tp=1, dp=8, ep=True), True),
        (Layout(tp=4, dp=2), False),
        (Layout(tp=4, dp=2, ep=True), True),
    ],
)
def test_minimax_fp8_alignment_follows_the_moe_split(
    minimax: ModelSpec, layout: Layout, ok: bool
) -> None:
    assert (fp8_blocks_align(minimax, layout) is None) is ok


@pytest.mark.parametrize("tp", [1, 2, 4, 8, 16])
def test_kimi_is_not_block_fp8_so_any_tp_aligns(kimi: ModelSpec, tp: int) -> None:
    assert fp8_blocks_align(kimi, Layout(tp=tp)) is None


@pytest.mark.parametrize("tp", [1, 2, 4, 8, 16])
def test_deepseek_v3_fp8_experts_of_2048_align_up_to_tp16(fixture_spec: SpecOf, tp: int) -> None:
    assert fp8_blocks_align(fixture_spec("DeepSeek-V3"), Layout(tp=tp)) is None


def test_qwen3_235b_fp8_fails_at_tp8_like_minimax(fixture_spec: SpecOf) -> None:
    spec = fixture_spec("Qwen3-235B-A22B-FP8")
    assert fp8_blocks_align(spec, Layout(tp=4)) is None
    assert fp8_blocks_align(spec, Layout(tp=8)) is not None
    assert fp8_blocks_align(spec, Layout(tp=8, ep=True)) is None


def test_dense_mlp_dimensions_are_checked_with_vllms_partition_message(
    fixture_spec: SpecOf,
) -> None:
    spec = fixture_spec("Qwen2.5-72B")
    fp8 = dataclasses.replace(
        spec,
        quantization=dataclasses.replace(
            fixture_spec("Qwen3-235B-A22B-FP8").quantization,
        ),
    )
    # 29568 / 8 = 3696 is not a multiple of 128; / 4 = 7392 is not either; / 2 = 14784 is not.
    reason = fp8_blocks_align(fp8, Layout(tp=8))
    assert reason is not None
    assert "Weight output_partition_size = 3696 is not divisible by" in reason.message
    assert fp8_blocks_align(fp8, Layout(tp=1)) is None


def test_shared_experts_stay_split_by_tp_even_with_expert_parallel(kimi: ModelSpec) -> None:
    from policies.checkpoint.module_groups import ModuleGroup
    from policies.checkpoint.quantization import QuantFormat, QuantSpec

    block_fp8 = QuantSpec(
        format=QuantFormat.FP8_BLOCK,
        method="fp8",
        weight_bits=8,
        block_size=(128, 128),
        quantized_groups=frozenset({ModuleGroup.SHARED_EXPERT}),
    )
    spec = dataclasses.replace(kimi, quantization=block_fp8)
    # shared intermediate 2048: TP16 leaves 128 per rank (aligned), TP32 leaves 64.
    assert fp8_blocks_align(spec, Layout(tp=16, ep=True)) is None
    reason = fp8_blocks_align(spec, Layout(tp=32, ep=True))
    assert reason is not None
    assert "shared expert" in reason.message


def test_pipeline_parallel_needs_model_support(minimax: ModelSpec) -> None:
    assert pipeline_parallel_supported(minimax, Layout(tp=1, pp=4)) is None
    unsupported = dataclasses.replace(minimax, supports_pp=False)
    assert pipeline_parallel_supported(unsupported, Layout(tp=1)) is None
    reason = pipeline_parallel_supported(unsupported, Layout(tp=1, pp=2))
    assert reason is not None
    assert reason.code == ReasonCode.PP_UNSUPPORTED


def test_pipeline_stages_cannot_outnumber_layers(minimax: ModelSpec) -> None:
    assert pipeline_stages_have_layers(minimax, Layout(tp=1, pp=62)) is None
    reason = pipeline_stages_have_layers(minimax, Layout(tp=1, pp=64))
    assert reason is not None
    assert reason.code == ReasonCode.PP_EXCEEDS_LAYERS


def test_expert_parallel_needs_experts(fixture_spec: SpecOf, minimax: ModelSpec) -> None:
    assert expert_parallel_needs_experts(minimax, Layout(tp=2, ep=True)) is None
    reason = expert_parallel_needs_experts(fixture_spec("Llama-3-70B"), Layout(tp=2, ep=True))
    assert reason is not None
    assert reason.code == ReasonCode.EP_NEEDS_EXPERTS


def test_tp_may_not_cross_pcie_nodes_but_may_span_nvlink() -> None:
    assert tensor_parallel_within_node(Layout(tp=8), 8, Interconnect.PCIE) is None
    reason = tensor_parallel_within_node(Layout(tp=16), 8, Interconnect.PCIE)
    assert reason is not None
    assert reason.code == ReasonCode.TP_CROSS_NODE
    assert tensor_parallel_within_node(Layout(tp=16), 8, Interconnect.NVLINK) is None


def test_check_model_rules_collects_every_failing_rule(minimax: ModelSpec) -> None:
    reasons = check_model_rules(minimax, Layout(tp=5, pp=64))
    codes = {r.code for r in reasons}
    assert {ReasonCode.HEADS_NOT_DIVISIBLE, ReasonCode.PP_EXCEEDS_LAYERS} <= codes
    assert len(MODEL_RULES) == 8
