"""Decode context parallel, throughput at load, and one recommendation per objective."""

from __future__ import annotations

from typing import Any

import pytest

from policies.admission import AdmissionRequest, Decision, Objective, admit
from policies.checkpoint.model_spec import ModelSpec
from policies.checkpoint.parameters import model_bytes
from policies.inventory import ClusterInventory, GpuProfile, gpu_profile
from policies.layout import Layout
from policies.layout_rules import (
    decode_context_parallel_backend,
    decode_context_parallel_divides_tp,
    decode_context_parallel_fits_kv_heads,
)
from policies.memory import KvCacheDtype, kv_bytes_per_token_per_gpu
from policies.reasons import ReasonCode
from policies.throughput import saturation_concurrency, throughput
from policies.units import GIB

PCIE_BOX = ClusterInventory.homogeneous("rtx-pro-6000", 1, 8)
MINIMAX_GIB = 214.3
KIMI_GIB = 554.3


def _decision(spec: ModelSpec, weights_gib: float, **request: Any) -> Decision:
    return admit(
        spec,
        None,
        PCIE_BOX,
        AdmissionRequest(weights_override_bytes=int(weights_gib * GIB), **request),
    )


def test_dcp_must_divide_tp(kimi: ModelSpec) -> None:
    assert decode_context_parallel_divides_tp(kimi, Layout(tp=8, dcp=4)) is None
    reason = decode_context_parallel_divides_tp(kimi, Layout(tp=6, dcp=4))
    assert reason is not None and "tp_size=6 must be divisible by dcp_size=4" in reason.message


def test_mla_takes_any_dcp_that_divides_tp(kimi: ModelSpec) -> None:
    assert decode_context_parallel_fits_kv_heads(kimi, Layout(tp=8, dcp=8)) is None


@pytest.mark.parametrize(
    ("tp", "dcp", "text"),
    [
        (8, 2, "greater than the model's total number of KV heads (8)"),
        (16, 4, "exceeds the maximum supported value (2)"),
    ],
)
def test_gqa_dcp_follows_vllms_kv_head_rules(
    minimax: ModelSpec, tp: int, dcp: int, text: str
) -> None:
    reason = decode_context_parallel_fits_kv_heads(minimax, Layout(tp=tp, dcp=dcp))
    assert reason is not None and reason.code == ReasonCode.DCP_INVALID
    assert text in reason.message
    # 48 heads / 8 KV heads = 6 query heads per KV head, divisible by 2.
    assert decode_context_parallel_fits_kv_heads(minimax, Layout(tp=16, dcp=2)) is None


def test_the_cpu_backends_return_no_lse_so_dcp_is_refused_there() -> None:
    reason = decode_context_parallel_backend(Layout(tp=2, dcp=2), GpuProfile.cpu_standin(8))
    assert reason is not None and reason.code == ReasonCode.DCP_BACKEND_UNSUPPORTED
    assert "return the softmax LSE during decode" in reason.message
    assert decode_context_parallel_backend(Layout(tp=2, dcp=2), gpu_profile("h200")) is None


def test_dcp_divides_kv_bytes_per_token_per_gpu(kimi: ModelSpec) -> None:
    plain = kv_bytes_per_token_per_gpu(kimi, Layout(tp=8), KvCacheDtype.AUTO)
    sharded = kv_bytes_per_token_per_gpu(kimi, Layout(tp=8, dcp=8), KvCacheDtype.AUTO)
    assert sharded * 8 == pytest.approx(plain, abs=8)


def test_dcp8_lets_an_8_gpu_kimi_hold_about_eight_times_the_context(kimi: ModelSpec) -> None:
    decision = _decision(kimi, KIMI_GIB)
    plain = decision.candidate(Layout(tp=8))
    sharded = decision.candidate(Layout(tp=8, dcp=8))
    assert not plain.fits  # the full 262k context does not fit unsharded
    assert sharded.usable and sharded.to_json_dict()["dcp"] == 8
    assert sharded.kv_cache_tokens == pytest.approx(8 * plain.kv_cache_tokens, rel=0.01)


def test_dcp_flag_judges_only_that_size(kimi: ModelSpec) -> None:
    decision = _decision(kimi, KIMI_GIB, dcp=4)
    assert {c.layout.dcp for c in decision.candidates} == {4}
    assert all(c.layout.tp >= 4 for c in decision.candidates)


def test_cpu_dcp_candidates_carry_vllms_refusal(kimi: ModelSpec) -> None:
    cpu = ClusterInventory.homogeneous(GpuProfile.cpu_standin(64), 1, 2)
    decision = admit(kimi, None, cpu, AdmissionRequest(layout=Layout(tp=2, dcp=2)))
    codes = {r.code for r in decision.candidates[0].reasons}
    assert ReasonCode.DCP_BACKEND_UNSUPPORTED in codes


def test_saturation_is_bounded_by_kv_and_max_num_seqs() -> None:
    assert saturation_concurrency(400_000, 1024, 1024) == 390
    assert saturation_concurrency(4_000_000, 1024, 1024) == 1024
    assert saturation_concurrency(500, 1024, 1024) == 0


def test_throughput_at_load_exceeds_single_stream_and_is_memory_bound_on_pcie(
    minimax: ModelSpec,
) -> None:
    shape = model_bytes(minimax)
    at_load = throughput(
        minimax,
        shape,
        Layout(tp=4, ep=True),
        gpu_profile("rtx-pro-6000"),
        kv_cache_dtype=KvCacheDtype.AUTO,
        gpus_per_node=8,
        kv_cache_tokens=400_000,
        max_num_seqs=1024,
    )
    assert at_load.saturation_concurrency == 390
    assert at_load.memory_bound
    assert at_load.tokens_per_second > 1000


def test_pipeline_stages_reread_their_weights_per_micro_batch(minimax: ModelSpec) -> None:
    shape = model_bytes(minimax)
    gpu = gpu_profile("rtx-pro-6000")

    def rate(layout: Layout) -> float:
        return throughput(
            minimax,
            shape,
            layout,
            gpu,
            kv_cache_dtype=KvCacheDtype.AUTO,
            gpus_per_node=8,
            kv_cache_tokens=400_000,
            max_num_seqs=1024,
        ).tokens_per_second

    assert rate(Layout(tp=4)) > rate(Layout(tp=2, pp=2))


def test_every_candidate_has_both_ceilings(minimax: ModelSpec) -> None:
    for c in _decision(minimax, MINIMAX_GIB).candidates:
        data = c.to_json_dict()
        assert data["decode_tok_s_ceiling"] > 0
        assert "throughput_tok_s_ceiling" in data and "saturation_concurrency" in data
        if c.fits:
            assert data["throughput_tok_s_ceiling"] > data["decode_tok_s_ceiling"]


def test_the_objective_changes_minimaxs_recommendation_on_the_pcie_box(
    minimax: ModelSpec,
) -> None:
    throughput_pick = _decision(minimax, MINIMAX_GIB).recommended
    latency_pick = _decision(minimax, MINIMAX_GIB, objective=Objective.LATENCY).recommended
    assert throughput_pick is not None and latency_pick is not None
    # The story's operators: TP4 with expert parallel for throughput.
    assert throughput_pick.layout == Layout(tp=4, ep=True)
    assert latency_pick.layout == Layout(tp=2, pp=2)


def test_the_json_carries_both_recommendations(minimax: ModelSpec) -> None:
    data = _decision(minimax, MINIMAX_GIB).to_json_dict()
    assert data["objective"] == "throughput"
    both = data["recommended_by_objective"]
    assert set(both) == {"latency", "throughput"}
    assert both["throughput"] == data["recommended"]
    assert (both["latency"]["tp"], both["latency"]["pp"]) == (2, 2)


def test_data_parallel_is_judged_but_never_recommended(minimax: ModelSpec) -> None:
    decision = _decision(minimax, MINIMAX_GIB)
    dp = decision.candidate(Layout(tp=2, pp=2, dp=2))
    assert dp.valid and dp.fits and not dp.deployable and not dp.usable
    assert ReasonCode.NOT_DEPLOYABLE in {r.code for r in dp.reasons}
    for pick in decision.recommended_by_objective.values():
        assert pick is not None and pick.layout.dp == 1


def test_expert_parallel_on_the_cpu_engine_is_not_deployable(minimax: ModelSpec) -> None:
    cpu = ClusterInventory.homogeneous(GpuProfile.cpu_standin(512), 1, 2)
    decision = admit(minimax, None, cpu, AdmissionRequest(layout=Layout(tp=2, ep=True)))
    assert not decision.candidates[0].deployable
