"""Memory per GPU: weights by stage, KV bytes per token, what is left for the KV cache."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from policies.checkpoint.model_spec import ModelSpec
from policies.checkpoint.parameters import model_bytes
from policies.checkpoint.weights import override_weights
from policies.engine_memory import EngineSettings
from policies.inventory import GpuProfile, gpu_profile
from policies.layout import Layout
from policies.memory import (
    KV_BLOCK_TOKENS,
    KvCacheDtype,
    estimate_memory,
    kv_block_tokens,
    kv_bytes_per_token_per_gpu,
    pipeline_stages,
    request_kv_bytes,
    weights_per_gpu_by_stage,
)
from policies.units import GIB

SpecOf = Callable[[str], ModelSpec]
SERVER_DEFAULTS = EngineSettings(max_num_batched_tokens=8192, max_num_seqs=1024)
"""vLLM's OpenAI-server defaults on a 70+ GiB GPU that is not an A100."""


@pytest.mark.parametrize(
    ("layers", "pp", "sizes"),
    [(61, 2, [31, 30]), (62, 4, [15, 16, 16, 15]), (8, 8, [1] * 8), (10, 3, [3, 4, 3])],
)
def test_pipeline_stages_split_layers_like_vllm_get_pp_indices(
    layers: int, pp: int, sizes: list[int]
) -> None:
    stages = pipeline_stages(layers, pp)
    assert [len(s) for s in stages] == sizes
    assert stages[0].start == 0
    assert stages[-1].stop == layers


def test_minimax_kv_per_token_matches_the_reference_figures(minimax: ModelSpec) -> None:
    assert kv_bytes_per_token_per_gpu(minimax, Layout(tp=1), KvCacheDtype.AUTO) == 253_952
    assert kv_bytes_per_token_per_gpu(minimax, Layout(tp=4), KvCacheDtype.AUTO) == 63_488


def test_gqa_kv_heads_are_replicated_beyond_the_kv_head_count(minimax: ModelSpec) -> None:
    at_8 = kv_bytes_per_token_per_gpu(minimax, Layout(tp=8), KvCacheDtype.AUTO)
    at_16 = kv_bytes_per_token_per_gpu(minimax, Layout(tp=16), KvCacheDtype.AUTO)
    assert at_8 == at_16 == 2 * 62 * 128 * 2


@pytest.mark.parametrize("tp", [1, 2, 4, 8, 16])
def test_mla_latent_is_replicated_on_every_tp_rank(kimi: ModelSpec, tp: int) -> None:
    per_gpu = kv_bytes_per_token_per_gpu(kimi, Layout(tp=tp), KvCacheDtype.AUTO)
    assert per_gpu == 61 * (512 + 64) * 2


def test_fp8_kv_cache_halves_bf16(kimi: ModelSpec, minimax: ModelSpec) -> None:
    for spec in (kimi, minimax):
        bf16 = kv_bytes_per_token_per_gpu(spec, Layout(tp=4), KvCacheDtype.AUTO)
        fp8 = kv_bytes_per_token_per_gpu(spec, Layout(tp=4), KvCacheDtype.FP8)
        assert fp8 * 2 == bf16


def test_pipeline_stages_divide_kv_by_layers(kimi: ModelSpec) -> None:
    assert kv_bytes_per_token_per_gpu(kimi, Layout(tp=4, pp=2), KvCacheDtype.AUTO) == 31 * 1152


def test_dsa_indexer_adds_its_fp8_key_per_layer(fixture_spec: SpecOf) -> None:
    glm5 = fixture_spec("GLM-5")
    per_gpu = kv_bytes_per_token_per_gpu(glm5, Layout(tp=8), KvCacheDtype.AUTO)
    assert per_gpu == 78 * (576 * 2 + 132)
    assert kv_bytes_per_token_per_gpu(glm5, Layout(tp=8), KvCacheDtype.FP8) == 78 * (656 + 132)


def test_sliding_window_layers_hold_at_most_the_window(fixture_spec: SpecOf) -> None:
    spec = fixture_spec("gpt-oss-120b")
    layers = range(spec.num_layers)
    per_layer = 2 * 8 * 64 * 2
    long = request_kv_bytes(spec, layers, per_layer, 131_072)
    assert long == per_layer * (18 * 131_072 + 18 * 128)


def test_weights_per_gpu_split_experts_over_tp_times_dp(minimax: ModelSpec) -> None:
    shape = model_bytes(minimax)
    tp4 = weights_per_gpu_by_stage(shape, Layout(tp=4))[0]
    tp4_dp2 = weights_per_gpu_by_stage(shape, Layout(tp=4, dp=2, ep=True))[0]
    assert tp4 == pytest.approx(shape.total_bytes / 4, rel=0.01)
    # DP halves the experts per GPU but not attention and embeddings.
    assert shape.total_bytes / 8 < tp4_dp2 < tp4


def test_dense_replicas_hold_the_whole_model_each(fixture_spec: SpecOf) -> None:
    shape = model_bytes(fixture_spec("Llama-3-70B"))
    one = weights_per_gpu_by_stage(shape, Layout(tp=4))
    two = weights_per_gpu_by_stage(shape, Layout(tp=4, dp=2))
    assert one == two


def test_replicated_mla_projections_keep_tp8_above_an_even_split(kimi: ModelSpec) -> None:
    shape = model_bytes(kimi)
    per_gpu = weights_per_gpu_by_stage(shape, Layout(tp=8))[0]
    assert per_gpu > shape.total_bytes / 8


def test_kimi_tp8_bf16_full_context_does_not_fit_and_says_what_would(kimi: ModelSpec) -> None:
    shape = model_bytes(kimi).scaled_to(override_weights(kimi, int(554.3 * GIB)))
    memory = estimate_memory(
        kimi,
        shape,
        Layout(tp=8),
        gpu_profile("rtx-pro-6000"),
        gpu_memory_utilization=0.9,
        kv_cache_dtype=KvCacheDtype.AUTO,
        max_model_len=262_144,
        settings=SERVER_DEFAULTS,
    )
    assert memory.weights_fit
    assert not memory.full_request_fits
    assert 0 < memory.max_model_len_fit < 262_144
    assert memory.max_model_len_fit % KV_BLOCK_TOKENS == 0
    assert memory.max_model_len_fit <= memory.kv_cache_tokens
    assert memory.max_concurrency < 1


def test_kv_tokens_are_whole_blocks_of_what_is_left(minimax: ModelSpec) -> None:
    memory = estimate_memory(
        minimax,
        model_bytes(minimax),
        Layout(tp=4),
        gpu_profile("h200"),
        gpu_memory_utilization=0.9,
        kv_cache_dtype=KvCacheDtype.AUTO,
        max_model_len=8192,
        settings=SERVER_DEFAULTS,
    )
    expected = memory.kv_cache_bytes // (63_488 * KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS
    assert memory.kv_cache_tokens == expected
    assert memory.max_concurrency == pytest.approx(memory.kv_cache_bytes / (63_488 * 8192))


def test_scaled_shape_matches_measured_totals_never_below(minimax: ModelSpec) -> None:
    measured = dataclasses.replace(
        override_weights(minimax, int(214.3 * GIB)), expert_bytes=int(209.5 * GIB)
    )
    scaled = model_bytes(minimax).scaled_to(measured)
    assert scaled.total_bytes >= measured.total_bytes
    assert scaled.total_bytes - measured.total_bytes < 1024 * 1024
    assert scaled.expert_bytes >= measured.expert_bytes


def test_the_cpu_engine_blocks_mla_by_16_tokens_and_by_128_on_amx_hosts(
    kimi: ModelSpec, minimax: ModelSpec
) -> None:
    plain = GpuProfile.cpu_standin(8)
    amx = GpuProfile.cpu_standin(8, amx_tiles=True)
    assert kv_block_tokens(kimi, plain) == 16
    assert kv_block_tokens(kimi, amx) == 128
    assert kv_block_tokens(minimax, plain) == kv_block_tokens(minimax, amx) == 128
