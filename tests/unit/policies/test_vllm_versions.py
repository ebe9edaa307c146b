"""Which vLLM versions subtract which memory term before they size the KV cache."""

from __future__ import annotations

import pytest

from policies.admission import AdmissionRequest, KvSource, ObservedKv, admit
from policies.checkpoint.model_spec import ModelSpec
from policies.engine_memory import MemoryTerm
from policies.errors import InvalidRequest
from policies.inventory import ClusterInventory
from policies.layout import Layout
from policies.vllm_versions import TERM_RULES, MemoryRules, SamplerPath, VllmVersion

RTX_BOX = ClusterInventory.homogeneous("rtx-pro-6000", 1, 8, disk_free_gib=1200)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("0.21", (0, 21)), ("0.21.1", (0, 21)), ("0.10.1rc1", (0, 10)), ("0.32.0+cpu", (0, 32))],
)
def test_versions_parse_to_major_and_minor(text: str, parsed: tuple[int, int]) -> None:
    assert VllmVersion.parse(text) == VllmVersion(*parsed)


def test_a_malformed_or_unknown_version_is_refused_with_what_is_known() -> None:
    with pytest.raises(InvalidRequest, match=r"of the form X\.Y"):
        VllmVersion.parse("latest")
    with pytest.raises(InvalidRequest, match=r"0\.10 to 0\.32"):
        MemoryRules.of(VllmVersion(0, 8))


def test_the_cuda_graph_estimate_is_subtracted_from_020_or_where_the_variable_asks() -> None:
    assert not MemoryRules.of(VllmVersion(0, 19)).cuda_graphs_subtracted
    assert MemoryRules.of(VllmVersion(0, 20)).cuda_graphs_subtracted
    assert not MemoryRules.of(VllmVersion(0, 32), cuda_graph_estimate=False).cuda_graphs_subtracted
    assert MemoryRules.of(VllmVersion(0, 18), cuda_graph_estimate=True).cuda_graphs_subtracted
    # Before 0.18 the variable does not exist: setting it changes nothing.
    assert not MemoryRules.of(VllmVersion(0, 17), cuda_graph_estimate=True).cuda_graphs_subtracted


@pytest.mark.parametrize(
    ("minor", "variable", "path"),
    [
        (10, None, SamplerPath.FLASHINFER),  # on wherever FlashInfer is installed
        (11, False, SamplerPath.TORCH_SORT),
        (12, None, SamplerPath.TORCH_SORT),  # FlashInfer opt-in from 0.12
        (16, None, SamplerPath.TORCH_SORT),
        (16, True, SamplerPath.FLASHINFER),
        (17, None, SamplerPath.TRITON),  # topk_topp_triton.py from 0.17.0
        (32, False, SamplerPath.TRITON),
        (32, True, SamplerPath.FLASHINFER),
    ],
)
def test_the_samplers_top_k_top_p_path_follows_the_version_and_its_variable(
    minor: int, variable: bool | None, path: SamplerPath
) -> None:
    assert MemoryRules.of(VllmVersion(0, minor), flashinfer_sampler=variable).sampler is path


def test_a_sorting_sampler_leaves_less_kv_than_tritons(minimax: ModelSpec) -> None:
    def tokens(minor: int) -> int:
        request = AdmissionRequest(layout=Layout(tp=4), vllm=MemoryRules.of(VllmVersion(0, minor)))
        return admit(minimax, None, RTX_BOX, request).candidate(Layout(tp=4)).kv_cache_tokens

    # 1,024 rows over a 200,064-token vocabulary: 24 more bytes per logit, about 4.6 GiB.
    assert tokens(16) < tokens(17) * 0.85


def test_the_engines_environment_sets_both_flags_on_unless_zero() -> None:
    v = VllmVersion(0, 18)
    assert MemoryRules.from_environment(v, {}) == MemoryRules.of(v)
    both = {"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "1", "VLLM_USE_FLASHINFER_SAMPLER": "1"}
    assert MemoryRules.from_environment(v, both) == MemoryRules.of(
        v, cuda_graph_estimate=True, flashinfer_sampler=True
    )
    off = {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
    assert MemoryRules.from_environment(VllmVersion(0, 11), off).sampler is SamplerPath.TORCH_SORT


def test_older_versions_capture_piecewise_graphs_on_the_older_grid() -> None:
    old, new = MemoryRules.of(VllmVersion(0, 10)), MemoryRules.of(VllmVersion(0, 12))
    assert not old.full_cuda_graphs and not old.capture_grid_2025
    assert new.full_cuda_graphs and new.capture_grid_2025
    assert old.init_communicators_subtracted and not new.init_communicators_subtracted


def test_language_model_only_is_refused_for_a_vllm_that_lacks_the_flag() -> None:
    with pytest.raises(InvalidRequest, match=r"does not exist in vLLM 0\.16"):
        AdmissionRequest(language_model_only=True, vllm=MemoryRules.of(VllmVersion(0, 16)))


def test_every_memory_term_states_its_versions() -> None:
    assert {rule.term for rule in TERM_RULES} == {str(term) for term in MemoryTerm}


def test_before_020_the_graphs_leave_the_kv_budget_whole(minimax: ModelSpec) -> None:
    def tp4(version: int) -> tuple[int, int]:
        request = AdmissionRequest(
            layout=Layout(tp=4), vllm=MemoryRules.of(VllmVersion(0, version))
        )
        c = admit(minimax, None, RTX_BOX, request).candidate(Layout(tp=4))
        return c.memory_breakdown[MemoryTerm.CUDA_GRAPHS], c.kv_cache_bytes

    graphs_new, kv_new = tp4(20)
    graphs_old, kv_old = tp4(19)
    assert graphs_new > 0 and graphs_old == 0
    assert kv_old == kv_new + graphs_new


def test_language_model_only_drops_the_vision_tower_from_every_gpu(kimi: ModelSpec) -> None:
    def weights(language_only: bool) -> int:
        request = AdmissionRequest(layout=Layout(tp=8), language_model_only=language_only)
        return admit(kimi, None, RTX_BOX, request).candidate(Layout(tp=8)).weights_bytes_per_gpu

    assert weights(True) < weights(False)


def test_an_observed_kv_size_replaces_the_model_for_its_layout_only(minimax: ModelSpec) -> None:
    seen = ObservedKv(layout=Layout(tp=4), kv_cache_tokens=399_424)
    decision = admit(
        minimax, None, RTX_BOX, AdmissionRequest(layout=Layout(tp=4), observed_kv=seen)
    )
    tp4 = decision.candidate(Layout(tp=4))
    assert tp4.kv_source is KvSource.OBSERVED
    assert tp4.kv_cache_tokens == 399_424
    assert tp4.kv_cache_bytes == 399_424 * tp4.kv_bytes_per_token_per_gpu
    assert tp4.to_json_dict()["kv_source"] == "observed"
    other = admit(
        minimax,
        None,
        RTX_BOX,
        AdmissionRequest(layout=Layout(tp=4, ep=True), observed_kv=seen),
    )
    assert other.candidate(Layout(tp=4, ep=True)).kv_source is KvSource.MODEL


def test_an_explicit_kv_space_is_what_the_cache_gets(minimax: ModelSpec) -> None:
    request = AdmissionRequest(layout=Layout(tp=4), kv_cache_memory_bytes=1 << 30)
    tp4 = admit(minimax, None, RTX_BOX, request).candidate(Layout(tp=4))
    assert tp4.kv_cache_bytes == 1 << 30
    assert tp4.kv_cache_tokens == (1 << 30) // (63_488 * 16) * 16


def test_plans_help_names_the_newest_supported_version() -> None:
    from policies.vllm_versions import NEWEST_SUPPORTED
    from switchyard.commands import plan

    assert str(NEWEST_SUPPORTED) == plan._NEWEST_VLLM


def test_plan_and_the_manager_take_the_nearest_supported_rules_for_the_installed_vllm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cluster.fleet import admission_gate
    from switchyard.commands.plan import vllm_rules

    for installed, applied in (("0.8.5", VllmVersion(0, 10)), ("0.40.0", VllmVersion(0, 32))):
        monkeypatch.setattr(admission_gate, "installed_vllm_version", lambda v=installed: v)
        assert vllm_rules(None, None).version == applied
        assert admission_gate.engine_memory_rules().version == applied
