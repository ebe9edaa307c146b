"""The admission policy's layout rules agree with the installed vLLM: its config-level
validators (heads % TP, expert parallel needs experts, KV heads per rank, the fused-MoE
split, the block-FP8 MoE check) reach the same verdicts as the policy on the real
MiniMax-M2.5 and Kimi-K2.5 configs and a dense miniature, without starting an engine.

The probe runs in a subprocess (policy_vllm_probe.py). The KV cache size the policy
predicts is checked against real engines in test_engines.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from cluster.miniature_generator import write_miniature
from policies.admission import AdmissionRequest, admit
from policies.checkpoint.hf_config import load_model_spec
from policies.inventory import ClusterInventory, GpuProfile
from policies.layout import Layout
from policies.layout_rules import (
    check_model_rules,
    fp8_blocks_align,
    kv_heads_split_or_replicate,
)
from policies.memory import KvCacheDtype, kv_bytes_per_token_per_layer
from policies.reasons import ReasonCode
from tests.support.vllm_cpu import needs_vllm_cpu

PROBE = Path(__file__).with_name("policy_vllm_probe.py")
REPORT_PREFIX = "POLICY_VLLM_PROBE "
KV_CACHE_SPACE_GIB = 1


pytestmark = needs_vllm_cpu


def _probe_env(extra_env: dict[str, str] | None = None) -> dict[str, str]:
    return dict(
        os.environ,
        VLLM_CPU_KVCACHE_SPACE=str(KV_CACHE_SPACE_GIB),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        **(extra_env or {}),
    )


def _probe(args: list[str], *, extra_env: dict[str, str] | None = None) -> Any:
    env = _probe_env(extra_env)
    done = subprocess.run(
        [sys.executable, str(PROBE), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith(REPORT_PREFIX)]
    if done.returncode != 0 or len(lines) != 1:
        pytest.fail(f"vLLM probe {args[0]} failed (exit {done.returncode}):\n{output[-6000:]}")
    return json.loads(lines[0][len(REPORT_PREFIX) :])


# --- layout validators --------------------------------------------------------------------

GRID = [
    (tp, pp, dp, ep)
    for tp in (1, 2, 3, 4, 5, 6, 8, 16)
    for pp in (1, 2)
    for dp in (1, 2)
    for ep in (False, True)
    if not (pp == 2 and dp == 2)
]


@pytest.fixture(scope="module")
def validator_cases(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    root = tmp_path_factory.mktemp("policy-validators")
    dirs = {}
    for name in ("MiniMax-M2.5", "Kimi-K2.5"):
        folder = root / name
        folder.mkdir()
        source = resources.files("cluster.miniature_generator").joinpath(
            f"reference_configs/{name}.config.json"
        )
        (folder / "config.json").write_text(source.read_text(encoding="utf-8"))
        dirs[name] = folder
    dirs["llama"] = write_miniature("llama", root / "llama")
    cases = []
    for name, folder in dirs.items():
        block = [128, 128] if name == "MiniMax-M2.5" else None
        key = "intermediate_size" if name == "MiniMax-M2.5" else None
        for tp, pp, dp, ep in GRID:
            case: dict[str, Any] = {
                "name": name,
                "model_dir": str(folder),
                "tp": tp,
                "pp": pp,
                "dp": dp,
                "ep": ep,
                "block": block,
            }
            if key:
                case["moe_intermediate_size_key"] = key
            cases.append(case)
        for tp, dcp in DCP_GRID:
            cases.append(
                {"name": name, "model_dir": str(folder), "tp": tp, "pp": 1, "dp": 1}
                | {"ep": False, "block": block, "dcp": dcp, "grid": "dcp"}
            )
    cases_path = root / "cases.json"
    cases_path.write_text(json.dumps(cases))
    results: list[dict[str, Any]] = _probe(["validators", str(cases_path)])
    return results


DCP_GRID = [(tp, dcp) for tp in (1, 2, 4, 8, 16) for dcp in (2, 4, 8, 16) if dcp <= 2 * tp]


def _layout_cases(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in cases if c.get("grid") != "dcp"]


VERIFY_CODES = {
    ReasonCode.HEADS_NOT_DIVISIBLE,
    ReasonCode.EP_NEEDS_EXPERTS,
    ReasonCode.PP_UNSUPPORTED,
}


def _layout(case: dict[str, Any]) -> Layout:
    return Layout(
        tp=case["tp"], pp=case["pp"], dp=case["dp"], ep=case["ep"], dcp=case.get("dcp", 1)
    )


def test_vllm_verify_with_parallel_config_agrees_with_the_policy(
    validator_cases: list[dict[str, Any]],
) -> None:
    disagreements = []
    for case in _layout_cases(validator_cases):
        spec = load_model_spec(Path(case["model_dir"]))
        codes = {r.code for r in check_model_rules(spec, _layout(case))}
        policy_refuses = bool(codes & VERIFY_CODES)
        if policy_refuses != (case["verify_error"] is not None):
            disagreements.append((case["name"], str(_layout(case)), codes, case["verify_error"]))
    assert not disagreements


def test_vllm_kv_heads_per_rank_match_the_policy(validator_cases: list[dict[str, Any]]) -> None:
    for case in _layout_cases(validator_cases):
        spec = load_model_spec(Path(case["model_dir"]))
        if case["verify_error"] is not None or kv_heads_split_or_replicate(spec, _layout(case)):
            # vLLM's model classes assert on these layouts; heads per rank are moot there.
            continue
        if spec.attention.mla is not None:
            # vLLM keeps one latent "head" per rank: the cache does not shrink with TP.
            assert case["kv_heads_per_rank"] == 1
            continue
        per_layer = kv_bytes_per_token_per_layer(spec, case["tp"], KvCacheDtype.AUTO)
        heads = per_layer // (2 * spec.attention.head_dim * spec.dtype_bytes)
        assert heads == case["kv_heads_per_rank"], (case["name"], case["tp"])


def test_vllm_fused_moe_split_matches_the_policy(validator_cases: list[dict[str, Any]]) -> None:
    moe_cases = [c for c in _layout_cases(validator_cases) if "moe_tp_size" in c]
    assert moe_cases
    for case in moe_cases:
        assert _layout(case).moe_split == case["moe_tp_size"], (case["name"], str(_layout(case)))


def test_vllm_block_fp8_moe_check_agrees_with_the_policy(
    validator_cases: list[dict[str, Any]],
) -> None:
    fp8_cases = [c for c in _layout_cases(validator_cases) if "fp8_moe_error" in c]
    assert fp8_cases
    for case in fp8_cases:
        spec = load_model_spec(Path(case["model_dir"]))
        reason = fp8_blocks_align(spec, _layout(case))
        policy_expert_refusal = reason is not None and "gate's and up's" in reason.message
        assert policy_expert_refusal == (case["fp8_moe_error"] is not None), (
            str(_layout(case)),
            reason,
            case["fp8_moe_error"],
        )


def test_the_story_verdicts_are_vllms(validator_cases: list[dict[str, Any]]) -> None:
    minimax = {
        (c["tp"], c["dp"], c["ep"]): c
        for c in _layout_cases(validator_cases)
        if c["name"] == "MiniMax-M2.5" and c["pp"] == 1
    }
    assert "192 is not divisible" in (minimax[(8, 1, False)]["fp8_moe_error"] or "")
    assert minimax[(4, 1, False)]["fp8_moe_error"] is None
    assert minimax[(8, 1, True)]["fp8_moe_error"] is None
    assert minimax[(4, 2, False)]["fp8_moe_error"] is not None


# --- decode context parallel --------------------------------------------------------------


def test_vllms_dcp_rules_agree_with_the_policy(validator_cases: list[dict[str, Any]]) -> None:
    """tp % dcp (ParallelConfig) and, for GQA, the KV-head rules (verify_with_parallel_config)."""
    dcp_cases = [c for c in validator_cases if c.get("grid") == "dcp"]
    assert dcp_cases
    disagreements = []
    for case in dcp_cases:
        spec = load_model_spec(Path(case["model_dir"]))
        codes = {r.code for r in check_model_rules(spec, _layout(case))}
        policy_refuses = ReasonCode.DCP_INVALID in codes
        verify_error = case.get("verify_error") or ""
        if verify_error and "context" not in verify_error.lower():
            continue  # vLLM stopped at an earlier rule (heads % TP), checked above
        vllm_error = case["parallel_error"] or verify_error or None
        if policy_refuses != (vllm_error is not None):
            disagreements.append((case["name"], case["tp"], case["dcp"], codes, vllm_error))
    assert not disagreements
    # Both kinds of refusal occur on these configs: MiniMax's 8 KV heads refuse DCP below
    # TP16, MLA takes it wherever it divides TP.
    assert any(c["parallel_error"] for c in dcp_cases)
    assert any(c.get("verify_error") and c["name"] == "MiniMax-M2.5" for c in dcp_cases)


def test_the_cpu_engine_refuses_dcp_as_the_planner_says(tmp_path: Path) -> None:
    """A real CPU engine at TP2 x DCP2 on the MLA miniature stops at vLLM's log-sum-exp check,
    and the planner refuses the same layout on a CPU stand-in for the same reason."""
    model_dir = write_miniature("kimi-k2.5", tmp_path / "kimi")
    cpu = ClusterInventory.homogeneous(GpuProfile.cpu_standin(8), 1, 2)
    decision = admit(
        load_model_spec(model_dir), None, cpu, AdmissionRequest(layout=Layout(tp=2, dcp=2))
    )
    planner = {r.code: r.message for r in decision.candidates[0].reasons}
    assert not decision.admitted
    assert "return the softmax LSE during decode" in planner[ReasonCode.DCP_BACKEND_UNSUPPORTED]

    done = subprocess.run(
        [sys.executable, str(PROBE), "dcp-engine", str(model_dir)],
        env=_probe_env({"VLLM_CPU_OMP_THREADS_BIND": "0|1"}),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = done.stdout + done.stderr
    assert f'{REPORT_PREFIX}{{"started": false' in output, output[-4000:]
    # The worker's own error (the engine process logs it; the driver sees "failed core").
    assert "requires attention implementations to return the softmax LSE" in output, output[-4000:]
