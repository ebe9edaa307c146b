"""The admission decision, checked against the story's deployments (issue 3's checks)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from policies.admission import AdmissionRequest, Decision, admit
from policies.checkpoint.model_spec import ModelSpec
from policies.checkpoint.weights import WeightSize, WeightSource, override_weights
from policies.errors import InvalidRequest
from policies.inventory import ClusterInventory
from policies.layout import Layout
from policies.memory import KvCacheDtype
from policies.reasons import ReasonCode
from policies.units import GIB

SpecOf = Callable[[str], ModelSpec]

RTX_BOX = ClusterInventory.homogeneous("rtx-pro-6000", 1, 8, disk_free_gib=1200)
KIMI_GIB = 554.3


def kimi_weights(kimi: ModelSpec) -> WeightSize:
    return override_weights(kimi, int(KIMI_GIB * GIB))


def codes(decision: Decision, layout: Layout) -> set[str]:
    return {r.code for r in decision.candidate(layout).reasons}


# --- MiniMax-M2.5 on 8x RTX PRO 6000 ------------------------------------------------------


@pytest.fixture(scope="module")
def minimax_on_rtx(minimax: ModelSpec) -> Decision:
    return admit(minimax, None, RTX_BOX, AdmissionRequest())


def test_minimax_pure_tp8_is_invalid_with_the_192_over_128_reason(minimax_on_rtx: Decision) -> None:
    tp8 = minimax_on_rtx.candidate(Layout(tp=8))
    assert not tp8.valid
    assert any(
        r.code == ReasonCode.FP8_BLOCK_MISALIGNED
        and "weight = 192 is not divisible by weight quantization block_n = 128" in r.message
        for r in tp8.reasons
    )


def test_minimax_tp4_is_valid_and_fits(minimax_on_rtx: Decision) -> None:
    tp4 = minimax_on_rtx.candidate(Layout(tp=4))
    assert tp4.valid and tp4.fits
    assert tp4.kv_bytes_per_token_per_gpu == 63_488


def test_minimax_tp8_with_expert_parallel_is_valid(minimax_on_rtx: Decision) -> None:
    assert minimax_on_rtx.candidate(Layout(tp=8, ep=True)).valid


def test_minimax_dp2_tp4_without_ep_is_invalid_but_with_ep_valid(
    minimax_on_rtx: Decision,
) -> None:
    assert not minimax_on_rtx.candidate(Layout(tp=4, dp=2)).valid
    assert ReasonCode.FP8_BLOCK_MISALIGNED in codes(minimax_on_rtx, Layout(tp=4, dp=2))
    assert minimax_on_rtx.candidate(Layout(tp=4, dp=2, ep=True)).valid


def test_minimax_is_admitted_on_the_box(minimax_on_rtx: Decision) -> None:
    assert minimax_on_rtx.admitted
    assert minimax_on_rtx.reasons == ()
    assert minimax_on_rtx.recommended is not None
    assert minimax_on_rtx.recommended.usable


def test_minimax_with_200_gib_free_disk_is_rejected_for_disk(minimax: ModelSpec) -> None:
    box = ClusterInventory.homogeneous("rtx-pro-6000", 1, 8, disk_free_gib=200)
    decision = admit(minimax, None, box, AdmissionRequest())
    assert not decision.admitted
    assert decision.recommended is None
    assert ReasonCode.DISK_INSUFFICIENT in {r.code for r in decision.reasons}
    assert ReasonCode.DISK_INSUFFICIENT in codes(decision, Layout(tp=4))


# --- Kimi-K2.5 (554.3 GiB) ----------------------------------------------------------------


def test_kimi_fits_tp8_with_fp8_kv_at_093_at_half_context_or_with_dcp(kimi: ModelSpec) -> None:
    request = AdmissionRequest(
        gpu_memory_utilization=0.93, kv_cache_dtype=KvCacheDtype.FP8, max_model_len=131_072
    )
    decision = admit(kimi, kimi_weights(kimi), RTX_BOX, request)
    tp8 = decision.candidate(Layout(tp=8))
    assert tp8.valid and tp8.fits
    assert tp8.max_concurrency >= 1
    assert decision.admitted
    # The full 262k context at vLLM's default batch settings. Reversed on purpose by the
    # admission-truth issue: the CUDA-graph and runtime constants, refitted to real
    # vLLM logs (python -m benchmarks run kv-calibration), leave TP8 room for it, as the
    # field's ~449,600 logged tokens say; decode context parallel still shards it eight ways.
    full = AdmissionRequest(gpu_memory_utilization=0.93, kv_cache_dtype=KvCacheDtype.FP8)
    decision = admit(kimi, kimi_weights(kimi), RTX_BOX, full)
    assert decision.candidate(Layout(tp=8)).usable
    assert decision.candidate(Layout(tp=8)).max_model_len_fit == 262_144
    assert decision.candidate(Layout(tp=8, dcp=8)).usable


def test_kimi_tp8_at_bf16_kv_and_full_context_is_refused_for_kv_with_a_shorter_length(
    kimi: ModelSpec,
) -> None:
    decision = admit(kimi, kimi_weights(kimi), RTX_BOX, AdmissionRequest())
    tp8 = decision.candidate(Layout(tp=8))
    assert tp8.valid
    assert not tp8.fits
    kv = [r for r in tp8.reasons if r.code == ReasonCode.KV_CACHE_TOO_SMALL]
    assert len(kv) == 1
    assert "262144 tokens" in kv[0].message
    assert f"max_model_len {tp8.max_model_len_fit} would fit" in kv[0].message
    assert 0 < tp8.max_model_len_fit < 262_144


def test_kimi_tp8_with_the_suggested_length_is_admitted(kimi: ModelSpec) -> None:
    first = admit(kimi, kimi_weights(kimi), RTX_BOX, AdmissionRequest(layout=Layout(tp=8)))
    suggested = first.candidate(Layout(tp=8)).max_model_len_fit
    again = admit(
        kimi,
        kimi_weights(kimi),
        RTX_BOX,
        AdmissionRequest(layout=Layout(tp=8), max_model_len=suggested),
    )
    assert again.admitted


def test_kimi_on_4_gpus_is_refused_for_weights(kimi: ModelSpec) -> None:
    four = ClusterInventory.homogeneous("rtx-pro-6000", 1, 4, disk_free_gib=1200)
    decision = admit(kimi, kimi_weights(kimi), four, AdmissionRequest())
    assert not decision.admitted
    reason_codes = {r.code for r in decision.reasons}
    assert ReasonCode.WEIGHTS_EXCEED_MEMORY in reason_codes
    assert ReasonCode.NO_FITTING_LAYOUT in reason_codes
    assert all(not c.fits for c in decision.candidates)


# --- behaviour of the decision ------------------------------------------------------------


def test_recommended_is_the_first_ranked_candidate_and_usable(minimax_on_rtx: Decision) -> None:
    assert minimax_on_rtx.candidates[0] is minimax_on_rtx.recommended
    usable = [c for c in minimax_on_rtx.candidates if c.usable]
    # Throughput (the default objective): the most sustained tokens/s on the fewest GPUs.
    fewest = min(c.layout.total_gpus for c in usable)
    assert max(
        c.throughput_tok_s_ceiling for c in usable if c.layout.total_gpus == fewest
    ) == pytest.approx(minimax_on_rtx.candidates[0].throughput_tok_s_ceiling, rel=1e-3)


def test_an_explicit_layout_is_the_only_candidate(minimax: ModelSpec) -> None:
    decision = admit(minimax, None, RTX_BOX, AdmissionRequest(layout=Layout(tp=8)))
    assert [c.layout for c in decision.candidates] == [Layout(tp=8)]
    assert not decision.admitted
    assert {r.code for r in decision.reasons} >= {
        ReasonCode.NO_VALID_LAYOUT,
        ReasonCode.FP8_BLOCK_MISALIGNED,
    }


def test_busy_gpus_are_not_used_until_freed(minimax: ModelSpec) -> None:
    busy = ClusterInventory.homogeneous("rtx-pro-6000", 1, 8, 1200, free_gpus_per_node=2)
    request = AdmissionRequest(layout=Layout(tp=4))
    blocked = admit(minimax, None, busy, request)
    assert not blocked.admitted
    assert ReasonCode.NOT_ENOUGH_GPUS in codes(blocked, Layout(tp=4))
    freed = admit(minimax, None, busy, request, freed={"node-0": 2})
    assert freed.admitted


def test_tp_does_not_span_pcie_nodes_but_pp_does(minimax: ModelSpec) -> None:
    two = ClusterInventory.homogeneous("rtx-pro-6000", 2, 4, 1200)
    decision = admit(minimax, None, two, AdmissionRequest())
    assert ReasonCode.TP_CROSS_NODE in codes(decision, Layout(tp=8, ep=True))
    across = decision.candidate(Layout(tp=4, pp=2))
    assert across.valid and across.fits
    assert set(across.nodes) == {"node-0", "node-1"}


def test_weights_already_on_a_nodes_disk_skip_the_disk_check(minimax: ModelSpec) -> None:
    box = ClusterInventory.homogeneous("rtx-pro-6000", 1, 8, disk_free_gib=10)
    cached = AdmissionRequest(weights_cached_on=frozenset({box.nodes[0].storage_id}))
    assert admit(minimax, None, box, cached).admitted


def test_max_model_len_beyond_the_models_context_is_refused(minimax: ModelSpec) -> None:
    decision = admit(minimax, None, RTX_BOX, AdmissionRequest(max_model_len=400_000))
    assert not decision.admitted
    assert ReasonCode.MAX_MODEL_LEN_EXCEEDS_CONTEXT in {r.code for r in decision.reasons}


def test_measured_weights_are_used_and_the_override_wins(minimax: ModelSpec) -> None:
    measured = WeightSize(
        total_bytes=int(214.3 * GIB),
        expert_bytes=int(209 * GIB),
        source=WeightSource.SAFETENSORS_HEADERS,
    )
    assert admit(minimax, measured, RTX_BOX, AdmissionRequest()).weights == measured
    request = AdmissionRequest(weights_override_bytes=300 * GIB)
    assert admit(minimax, measured, RTX_BOX, request).weights.total_bytes == 300 * GIB


def test_a_cpu_standin_cluster_can_be_planned(fixture_spec: SpecOf) -> None:
    from policies.inventory import GpuProfile, NodeInventory

    node = NodeInventory(
        name="cpu-0", gpu=GpuProfile.cpu_standin(400), gpus=4, free_gpus=4, disk_free_bytes=None
    )
    decision = admit(
        fixture_spec("Llama-3-70B"),
        None,
        ClusterInventory(nodes=(node,)),
        AdmissionRequest(max_model_len=4096),
    )
    assert decision.admitted
    assert decision.recommended is not None
    assert decision.recommended.gpu == "cpu-standin"


def test_json_has_exactly_the_issues_shape(minimax_on_rtx: Decision) -> None:
    data = minimax_on_rtx.to_json_dict()
    # Changed on purpose by the planner-accuracy issue: objective, recommended_by_objective;
    # per candidate dcp, deployable, memory_breakdown, kv_cache_bytes and throughput at load;
    # by the admission-truth issue: kv_source (model or observed).
    assert set(data) == {
        "admitted",
        "reasons",
        "objective",
        "recommended",
        "recommended_by_objective",
        "candidates",
    }
    candidate_keys = {
        "tp",
        "pp",
        "dp",
        "ep",
        "dcp",
        "valid",
        "fits",
        "deployable",
        "reasons",
        "weights_gib_per_gpu",
        "memory_breakdown",
        "kv_cache_bytes",
        "kv_bytes_per_token_per_gpu",
        "kv_cache_tokens",
        "kv_source",
        "max_concurrency",
        "decode_tok_s_ceiling",
        "saturation_concurrency",
        "throughput_tok_s_ceiling",
    }
    assert data["recommended"] is not None
    assert set(data["recommended"]) == candidate_keys
    assert all(set(c) == candidate_keys for c in data["candidates"])
    tp8 = next(
        c for c in data["candidates"] if (c["tp"], c["dp"], c["ep"], c["dcp"]) == (8, 1, False, 1)
    )
    assert tp8["reasons"][0].startswith("fp8_block_misaligned: ")
    assert isinstance(tp8["ep"], bool)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"gpu_memory_utilization": 0.0},
        {"gpu_memory_utilization": 1.5},
        {"max_model_len": 0},
        {"weights_override_bytes": -1},
    ],
)
def test_bad_requests_are_refused_before_anything_is_judged(kwargs: dict[str, float]) -> None:
    with pytest.raises(InvalidRequest):
        AdmissionRequest(**kwargs)  # type: ignore[arg-type]


# --- At cluster scale ----------------------------------------------------------------------


def test_no_layout_with_more_tp_than_attention_heads_is_listed(minimax: ModelSpec) -> None:
    # vLLM refuses them all (heads % TP); on 512 nodes they were most of the candidates.
    big = ClusterInventory.homogeneous("h100", 512, 8, 1200)
    decision = admit(minimax, None, big, AdmissionRequest())
    assert decision.admitted
    assert max(c.layout.tp for c in decision.candidates) <= minimax.attention.num_heads


def test_candidates_grow_with_the_log_of_the_cluster_not_its_nodes(minimax: ModelSpec) -> None:
    def count(nodes: int) -> int:
        inventory = ClusterInventory.homogeneous("h100", nodes, 8, 1200)
        return len(admit(minimax, None, inventory, AdmissionRequest()).candidates)

    # Eight times the nodes: powers of two for DP and PP add a few sizes each.
    assert count(512) < 2 * count(64)


def test_a_refusal_on_many_nodes_counts_them_instead_of_naming_each(minimax: ModelSpec) -> None:
    busy = ClusterInventory.homogeneous("h100", 64, 8, 1200, free_gpus_per_node=2)
    decision = admit(minimax, None, busy, AdmissionRequest(layout=Layout(tp=4)))
    (reason,) = [r for r in decision.candidates[0].reasons if r.code == ReasonCode.NOT_ENOUGH_GPUS]
    assert reason.message.endswith("free GPUs per node: 64 nodes 2/8.")
