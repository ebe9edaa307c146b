"""The story's four deployments judged as the field ran them (8x RTX PRO 6000, PCIe).

Kimi-K2.5 as the public field report ran it (voipmonitor/rtx6kpro, models/kimi-k25.md:
native INT4, TP8, FP8 KV, gpu_memory_utilization 0.93, `--max-num-batched-tokens 4096`,
`--language-model-only`) on a vLLM nightly of the 0.17 line, which did not yet take its
CUDA-graph estimate out of the KV budget; MiniMax-M2.5 as the story's log shows it.
"""

from __future__ import annotations

from policies.admission import AdmissionRequest, Objective, admit
from policies.checkpoint.model_spec import ModelSpec
from policies.checkpoint.weights import override_weights
from policies.inventory import ClusterInventory
from policies.layout import Layout
from policies.memory import KvCacheDtype
from policies.reasons import ReasonCode
from policies.units import GIB
from policies.vllm_versions import MemoryRules, VllmVersion

RTX_BOX = ClusterInventory.homogeneous("rtx-pro-6000", 1, 8, disk_free_gib=1200)
FIELD_VLLM = MemoryRules.of(VllmVersion(0, 17))
"""The report's image: a nightly carrying vLLM PRs #34597 and #34795 that takes
`--language-model-only` (vLLM has it from 0.17)."""
FULL_CONTEXT = 262_144


def _kimi_request(layout: Layout, max_num_batched_tokens: int | None = None) -> AdmissionRequest:
    return AdmissionRequest(
        layout=layout,
        gpu_memory_utilization=0.93,
        kv_cache_dtype=KvCacheDtype.FP8,
        vllm=FIELD_VLLM,
        language_model_only=True,
        max_num_batched_tokens=max_num_batched_tokens,
    )


def test_kimi_tp8_fp8_kv_is_admitted_at_full_context_with_the_fields_batch_settings(
    kimi: ModelSpec,
) -> None:
    weights = override_weights(kimi, int(554.3 * GIB))
    decision = admit(
        kimi, weights, RTX_BOX, _kimi_request(Layout(tp=8), max_num_batched_tokens=4096)
    )
    assert decision.admitted, decision.reasons
    tp8 = decision.candidate(Layout(tp=8))
    assert tp8.max_model_len_fit == FULL_CONTEXT
    # The field logged about 449,600 tokens for this deployment.
    assert 0.9 <= tp8.kv_cache_tokens / 449_600 <= 1.1


def test_kimi_tp8_fp8_kv_is_admitted_at_full_context_with_vllms_default_batch(
    kimi: ModelSpec,
) -> None:
    weights = override_weights(kimi, int(554.3 * GIB))
    decision = admit(kimi, weights, RTX_BOX, _kimi_request(Layout(tp=8)))
    assert decision.admitted, decision.reasons
    assert decision.candidate(Layout(tp=8)).max_model_len_fit == FULL_CONTEXT


def test_kimi_tp8_fp8_kv_at_full_context_is_admitted_on_the_newest_vllm_too(
    kimi: ModelSpec,
) -> None:
    # The installed vLLM takes its CUDA-graph estimate out of the KV budget; still room.
    weights = override_weights(kimi, int(554.3 * GIB))
    request = AdmissionRequest(
        layout=Layout(tp=8), gpu_memory_utilization=0.93, kv_cache_dtype=KvCacheDtype.FP8
    )
    assert request.vllm.cuda_graphs_subtracted
    decision = admit(kimi, weights, RTX_BOX, request)
    assert decision.admitted, decision.reasons


def test_kimi_tp8_with_decode_context_parallel_8_is_admitted(kimi: ModelSpec) -> None:
    weights = override_weights(kimi, int(554.3 * GIB))
    layout = Layout(tp=8, dcp=8)
    decision = admit(kimi, weights, RTX_BOX, _kimi_request(layout, max_num_batched_tokens=4096))
    assert decision.admitted, decision.reasons
    # The field logged about 3,621,504 tokens with dcp 8.
    assert 0.85 <= decision.candidate(layout).kv_cache_tokens / 3_621_504 <= 1.1


def test_minimax_tp4_with_expert_parallel_is_admitted(minimax: ModelSpec) -> None:
    layout = Layout(tp=4, ep=True)
    decision = admit(minimax, None, RTX_BOX, AdmissionRequest(layout=layout))
    assert decision.admitted, decision.reasons


def test_minimax_tp8_without_expert_parallel_is_refused_in_vllms_words(
    minimax: ModelSpec,
) -> None:
    decision = admit(minimax, None, RTX_BOX, AdmissionRequest(layout=Layout(tp=8)))
    assert not decision.admitted
    tp8 = decision.candidate(Layout(tp=8))
    assert any(
        r.code == ReasonCode.FP8_BLOCK_MISALIGNED
        and "The output_size of gate's and up's weight = 192 is not divisible by weight "
        "quantization block_n = 128"
        in r.message
        for r in tp8.reasons
    )


def test_a_layout_the_deployer_refuses_is_never_ranked_above_one_it_deploys(
    minimax: ModelSpec, kimi: ModelSpec
) -> None:
    # vLLM data parallel (one engine group over TP x DP ranks) is judged but not deployed.
    for spec in (minimax, kimi):
        for objective in Objective:
            decision = admit(spec, None, RTX_BOX, AdmissionRequest(objective=objective))
            ranks = [c.deployable for c in decision.candidates if c.valid and c.fits]
            assert False in ranks, "data parallel candidates are judged"
            assert ranks == sorted(ranks, reverse=True), objective
            assert decision.recommended is not None and decision.recommended.deployable
