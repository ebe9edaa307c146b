"""The KV calibration set: real vLLM logs, parsed into the planner's requests, and a fit
that never sees the log it predicts."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from benchmarks import kv_calibration
from benchmarks.calibration_logs import LOGS_FILE, load_logs
from benchmarks.kv_calibration import Prediction, fit
from policies.engine_memory import FittedConstants
from policies.layout import Layout
from policies.memory import KvCacheDtype
from policies.units import MIB

LOGS = load_logs()


def test_the_counted_logs_cover_what_the_memory_model_must_hold_for() -> None:
    counted = [log for log in LOGS if not log.gpu.unified_memory]
    assert len(counted) >= 8
    gpus = {log.gpu.name or log.gpu.profile for log in counted}
    assert len(gpus) >= 3, gpus
    attention = {log.spec().attention.mla is not None for log in counted}
    assert attention == {True, False}, "MLA and GQA models"
    tps = {log.layout().tp for log in counted}
    assert {1, 8} <= tps, tps
    assert {log.request().kv_cache_dtype for log in counted} == set(KvCacheDtype)
    assert any(log.layout().dcp > 1 for log in counted)


def test_every_log_names_its_source_version_and_logged_kv_size() -> None:
    for log in LOGS:
        assert log.link.startswith("https://"), log.id
        assert log.vllm_version and log.vllm_version_note, log.id
        assert log.quote, log.id
        assert log.logged.gpu_kv_cache_tokens > 0
        log.rules()  # a version the memory terms know


def test_an_entry_becomes_the_request_plan_would_build_from_its_engine_arguments() -> None:
    by_id = {log.id: log for log in LOGS}
    kimi = by_id["kimi-k25-rtx6kpro-tp8-fp8-dcp8"]
    request = kimi.request()
    assert request.layout == Layout(tp=8, dcp=8)
    assert request.kv_cache_dtype is KvCacheDtype.FP8
    assert request.gpu_memory_utilization == 0.93
    assert request.max_num_batched_tokens == 4096
    assert request.language_model_only
    assert not request.vllm.cuda_graphs_subtracted, "a nightly of the 0.17 line"
    k26 = by_id["kimi-k26-rtx6kpro-tp8-fp8-dcp1"].request()
    assert k26.vllm.cuda_graphs_subtracted, "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1"
    assert (k26.max_num_seqs, k26.max_model_len) == (128, 262_144)
    a100 = by_id["minimax-m27-a100-tp4"].request()
    assert not a100.full_cuda_graphs, "cudagraph_mode PIECEWISE"


def test_a_log_left_out_is_predicted_with_constants_fitted_to_the_others_only() -> None:
    logs = LOGS[:3]
    small, large = FittedConstants(runtime_bytes=0), FittedConstants(runtime_bytes=1)

    def at(tokens: list[int]) -> list[Prediction]:
        return [Prediction(t, 0) for t in tokens]

    logged = [log.logged.gpu_kv_cache_tokens for log in logs]
    # `small` predicts the first two logs exactly and misses the third by half; `large`
    # the other way round.
    table = {
        small: at([logged[0], logged[1], logged[2] // 2]),
        large: at([logged[0] // 2, logged[1] // 2, logged[2]]),
    }
    assert fit(table, logs, [0, 1, 2]) == small
    assert fit(table, logs, [2]) == large, "fitted to what it keeps only"
    assert fit(table, logs, [0, 1]) == small


def test_a_unified_memory_log_is_shown_but_neither_fitted_nor_held_to_the_target(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A coarse grid: the subject is which logs the fit sees, not the constants.
    monkeypatch.setattr(kv_calibration, "GRAPH_GRID", (0, 192 * 1024, 1024 * 1024))
    monkeypatch.setattr(kv_calibration, "RUNTIME_GRID", (0, 512 * MIB, 2048 * MIB))
    gb10 = next(log for log in LOGS if log.gpu.unified_memory)
    counted = [log for log in LOGS if not log.gpu.unified_memory][:2]
    found, fitted = kv_calibration.rows([*counted, gb10])
    assert [r.counted for r in found] == [True, True, False]
    assert kv_calibration.rows(counted)[1] == fitted, "the fit never sees it"
    assert found[2].left_out_tokens == found[2].in_sample_tokens
    missed = replace(found[2], left_out_tokens=found[2].logged_tokens * 3)
    assert kv_calibration.verdict([*found[:2], missed]) == kv_calibration.verdict(found[:2]) | {
        "shown_not_counted": 1
    }


def test_a_malformed_entry_is_refused_naming_its_field(tmp_path: Path) -> None:
    entry = yaml.safe_load(LOGS_FILE.read_text())["logs"][0]
    entry["logged"] = {**entry["logged"], "gpu_kv_cache_tokens": 0}
    broken = tmp_path / "logs.yaml"
    broken.write_text(yaml.safe_dump({"logs": [entry]}))
    with pytest.raises(ValidationError, match="gpu_kv_cache_tokens"):
        load_logs(broken)
