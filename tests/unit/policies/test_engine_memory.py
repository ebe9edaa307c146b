"""vLLM's non-KV memory, term by term, and the one real log it must reproduce."""

from __future__ import annotations

from dataclasses import replace

import pytest

from policies.admission import AdmissionRequest, admit
from policies.batch_defaults import BatchLimits, UsageContext, batch_defaults
from policies.checkpoint.model_spec import ModelSpec
from policies.engine_memory import (
    CUDA_CONTEXT_BYTES,
    EngineSettings,
    MemoryTerm,
    activation_peak_bytes,
    capture_sizes,
    communication_bytes,
    cuda_context_bytes,
    cuda_graph_bytes,
    forward_transient_bytes,
    moe_workspace_bytes,
    runtime_bytes,
    sampler_peak_bytes,
)
from policies.inventory import ClusterInventory, GpuProfile, gpu_profile
from policies.layout import Layout
from policies.reasons import ReasonCode
from policies.units import GIB, MIB
from policies.vllm_versions import MemoryRules, SamplerPath, VllmVersion

SERVER = EngineSettings(max_num_batched_tokens=8192, max_num_seqs=1024)
RTX = gpu_profile("rtx-pro-6000")


@pytest.mark.parametrize(
    ("gpu", "limits"),
    [
        ("rtx-pro-6000", BatchLimits(8192, 1024)),
        ("h200", BatchLimits(8192, 1024)),
        ("a100-80g", BatchLimits(2048, 256)),  # vLLM excludes the A100 by name
        ("l40s", BatchLimits(2048, 256)),
    ],
)
def test_batch_defaults_follow_vllm_get_batch_defaults_for_the_server(
    gpu: str, limits: BatchLimits
) -> None:
    assert batch_defaults(gpu_profile(gpu)) == limits


def test_batch_defaults_at_160_gib_and_offline_and_on_the_cpu() -> None:
    b200 = GpuProfile(
        name="b200",
        memory_bytes=180 * GIB,
        hbm_bandwidth_gbps=8000,
        interconnect=RTX.interconnect,
        link_bandwidth_gbps=900,
        link_latency_us=0.5,
    )
    assert batch_defaults(b200) == BatchLimits(16384, 1024)
    assert batch_defaults(RTX, usage=UsageContext.LLM_CLASS) == BatchLimits(16384, 1024)
    cpu = GpuProfile.cpu_standin(8)
    assert batch_defaults(cpu, world_size=2) == BatchLimits(4096, 256)


def test_moe_workspace_is_tritons_two_buffers_at_the_token_budget(minimax: ModelSpec) -> None:
    # MiniMax TP4: per-rank expert width 384 < hidden 3072, so both buffers are M x 8 x 3072.
    assert moe_workspace_bytes(minimax, Layout(tp=4), RTX, 8192) == 2 * 8192 * 8 * 3072 * 2
    # Expert parallel keeps experts whole (1536 wide), still below the hidden size.
    assert moe_workspace_bytes(minimax, Layout(tp=4, ep=True), RTX, 8192) == 2 * 8192 * 8 * 3072 * 2


def test_moe_workspace_on_the_cpu_is_only_the_output(minimax: ModelSpec) -> None:
    cpu = GpuProfile.cpu_standin(8)
    assert moe_workspace_bytes(minimax, Layout(tp=1), cpu, 2048) == 2048 * 3072 * 2


def test_sampler_holds_bf16_logits_and_three_fp32_copies(minimax: ModelSpec) -> None:
    # Triton's top-k/top-p works in place: the fp32 logits, then softmax and the noise.
    rows, vocab = 1024, minimax.vocab_size
    expected = rows * vocab * (2 + 12) + 8192 * minimax.hidden_size * 2
    assert sampler_peak_bytes(minimax, SERVER) == expected
    # Fewer sequences, smaller sampler: rows are min(max_num_seqs, tokens).
    small = EngineSettings(max_num_batched_tokens=512, max_num_seqs=1024)
    assert sampler_peak_bytes(minimax, small) < expected / 1.9


def test_the_sort_of_vllm_012_to_016_holds_its_indices_and_cubs_buffers(
    minimax: ModelSpec,
) -> None:
    # bf16 + fp32 logits, then sorted values (4) and int64 indices (8), the int64 index
    # input (8) and CUB's alternate keys (4) and values (8): 38 bytes per logit.
    hidden = 8192 * minimax.hidden_size * 2
    sort = replace(SERVER, sampler=SamplerPath.TORCH_SORT)
    assert sampler_peak_bytes(minimax, sort) == 1024 * minimax.vocab_size * 38 + hidden
    flashinfer = replace(SERVER, sampler=SamplerPath.FLASHINFER)
    assert sampler_peak_bytes(minimax, flashinfer) == sampler_peak_bytes(minimax, SERVER)
    # Below eight rows vLLM sorts even where it has the Triton kernel.
    few = EngineSettings(max_num_batched_tokens=8192, max_num_seqs=4)
    assert few.sampler_in_use is SamplerPath.TORCH_SORT
    assert sampler_peak_bytes(minimax, few) == 4 * minimax.vocab_size * 38 + hidden


def test_activation_peak_is_the_larger_of_forward_and_sampler(minimax: ModelSpec) -> None:
    layout = Layout(tp=4)
    last = activation_peak_bytes(minimax, layout, SERVER, last_stage=True)
    first = activation_peak_bytes(minimax, layout, SERVER, last_stage=False)
    assert last == sampler_peak_bytes(minimax, SERVER)
    assert first == forward_transient_bytes(minimax, layout, 8192) < last


def test_capture_sizes_are_vllms_default_grid() -> None:
    sizes = capture_sizes(SERVER, RTX)
    assert sizes[:4] == (1, 2, 4, 8)
    assert sizes[-3:] == (480, 496, 512)
    assert len(sizes) == 51
    assert max(capture_sizes(EngineSettings(8192, 128), RTX)) == 256
    sm100 = GpuProfile(**{**RTX.__dict__, "name": "b200", "compute_capability": (10, 0)})
    assert max(capture_sizes(SERVER, sm100)) == 1024


def test_cuda_graphs_cost_nothing_eager_or_on_the_cpu(minimax: ModelSpec) -> None:
    layers = range(62)
    assert cuda_graph_bytes(minimax, Layout(tp=4), RTX, SERVER, layers) > 2 * GIB
    eager = EngineSettings(8192, 1024, enforce_eager=True)
    assert cuda_graph_bytes(minimax, Layout(tp=4), RTX, eager, layers) == 0
    cpu = GpuProfile.cpu_standin(8)
    assert cuda_graph_bytes(minimax, Layout(tp=4), cpu, SERVER, layers) == 0


def test_cuda_graphs_grow_with_capture_sizes_and_layers(minimax: ModelSpec) -> None:
    few = cuda_graph_bytes(minimax, Layout(tp=4), RTX, EngineSettings(8192, 16), range(62))
    many = cuda_graph_bytes(minimax, Layout(tp=4), RTX, SERVER, range(62))
    half = cuda_graph_bytes(minimax, Layout(tp=4, pp=2), RTX, SERVER, range(31))
    assert few < half < many


def test_communication_buffers_by_tp_size_and_link() -> None:
    h200 = gpu_profile("h200")
    assert communication_bytes(Layout(tp=1), RTX) == 0
    # Custom all-reduce's IPC buffers count only where vLLM's snapshot follows their start
    # (0.10); on PCIe it runs for two GPUs only.
    tp2, tp4 = Layout(tp=2), Layout(tp=4)
    assert communication_bytes(tp2, RTX, init_buffers_subtracted=True) > communication_bytes(
        tp4, RTX, init_buffers_subtracted=True
    )
    assert communication_bytes(tp2, RTX) == communication_bytes(tp4, RTX)
    assert communication_bytes(Layout(tp=8), h200) > communication_bytes(Layout(tp=8), RTX)
    assert communication_bytes(Layout(tp=4, pp=2), RTX) > communication_bytes(Layout(tp=4), RTX)
    assert communication_bytes(Layout(tp=4), GpuProfile.cpu_standin(8)) == 0


def test_runtime_keeps_the_samplers_buffer_on_the_last_stage(minimax: ModelSpec) -> None:
    buffer = RTX.sm_count * minimax.vocab_size * 4
    assert runtime_bytes(minimax, RTX, last_stage=True) - buffer == runtime_bytes(
        minimax, RTX, last_stage=False
    )
    # Only Triton's kernel keeps a buffer.
    for other in (SamplerPath.TORCH_SORT, SamplerPath.FLASHINFER):
        assert runtime_bytes(minimax, RTX, last_stage=True, sampler=other) == runtime_bytes(
            minimax, RTX, last_stage=False
        )


def test_cuda_context_is_outside_the_budget() -> None:
    assert cuda_context_bytes(RTX) == CUDA_CONTEXT_BYTES
    assert cuda_context_bytes(GpuProfile.cpu_standin(8)) == 0


def test_minimax_tp4_on_rtx_pro_6000_matches_the_real_log(minimax: ModelSpec) -> None:
    """The log: "Model loading took 53.75 GiB ... Available KV cache memory: 23.62 GiB ...
    GPU KV cache size: 399,424 tokens" at gpu_memory_utilization 0.9, default settings, on
    vLLM 0.15 or 0.16 (benchmarks/kv_calibration_logs.yaml says why)."""
    inventory = ClusterInventory.homogeneous("rtx-pro-6000", 1, 4)
    request = AdmissionRequest(
        weights_override_bytes=int(214.3 * GIB),
        layout=Layout(tp=4),
        vllm=MemoryRules.of(VllmVersion(0, 16)),
    )
    candidate = admit(minimax, None, inventory, request).candidates[0]
    assert candidate.memory_breakdown[MemoryTerm.WEIGHTS] == pytest.approx(53.75 * GIB, rel=0.01)
    assert candidate.kv_cache_bytes == pytest.approx(23.62 * GIB, rel=0.02)
    assert candidate.kv_cache_tokens == pytest.approx(399_424, rel=0.02)


def test_breakdown_and_kv_cache_sum_to_the_budget(minimax: ModelSpec, kimi: ModelSpec) -> None:
    inventory = ClusterInventory.homogeneous("rtx-pro-6000", 1, 8)
    budget = int(RTX.memory_bytes * 0.9)
    for spec, weights in ((minimax, 214.3), (kimi, 554.3)):
        decision = admit(
            spec, None, inventory, AdmissionRequest(weights_override_bytes=int(weights * GIB))
        )
        for c in decision.candidates:
            if c.kv_cache_bytes:
                total = sum(c.memory_breakdown.values()) + c.kv_cache_bytes
                assert total == pytest.approx(budget, abs=MIB)
                assert set(c.memory_breakdown) == {str(t) for t in MemoryTerm}


def test_a_utilization_that_leaves_no_room_for_the_cuda_context_is_refused(
    minimax: ModelSpec,
) -> None:
    inventory = ClusterInventory.homogeneous("rtx-pro-6000", 1, 4)
    request = AdmissionRequest(
        weights_override_bytes=int(214.3 * GIB), layout=Layout(tp=4), gpu_memory_utilization=0.999
    )
    candidate = admit(minimax, None, inventory, request).candidates[0]
    assert ReasonCode.GPU_MEMORY_UTILIZATION_TOO_HIGH in {r.code for r in candidate.reasons}
