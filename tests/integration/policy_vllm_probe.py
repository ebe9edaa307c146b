"""Asks the installed vLLM what it decides about layouts and KV caches; run as a subprocess.

One mode, printing one line that starts with REPORT_PREFIX followed by JSON:

- `validators CASES_JSON`: for each (model dir, tp, pp, dp, ep, dcp) case, run vLLM's
  config-level validators that need no GPU: `ParallelConfig` (tp % dcp),
  `ModelConfig.verify_with_parallel_config` (heads % TP, expert parallel needs experts,
  pipeline support, DCP's KV-head rules), `ModelConfig.get_num_kv_heads` (KV heads per
  rank), the fused-MoE split (`FusedMoEParallelConfig.make` / `flatten_tp_across_dp_and_pcp`)
  and `validate_fp8_block_shape_moe` on the resulting per-rank expert size, inside a
  one-process gloo group.
- `dcp-engine MODEL_DIR`: start a real CPU engine at TP2 with decode context parallel 2 and
  report whether it started and, if not, the error vLLM raised.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from typing import Any

REPORT_PREFIX = "POLICY_VLLM_PROBE "


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def validators_report(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from vllm.config import ModelConfig, ParallelConfig, VllmConfig, set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel
    from vllm.model_executor.layers.fused_moe.config import FusedMoEParallelConfig
    from vllm.model_executor.layers.quantization.utils.fp8_utils import (
        validate_fp8_block_shape_moe,
    )

    with set_current_vllm_config(VllmConfig()):
        init_distributed_environment(
            world_size=1,
            rank=0,
            local_rank=0,
            distributed_init_method=f"tcp://127.0.0.1:{_free_port()}",
            backend="gloo",
        )
        initialize_model_parallel(1, 1)
    models: dict[str, Any] = {}
    results = []
    for case in cases:
        model_dir = case["model_dir"]
        if model_dir not in models:
            models[model_dir] = ModelConfig(model=model_dir, skip_tokenizer_init=True)
        model = models[model_dir]
        result: dict[str, Any] = dict(case)
        try:
            parallel = ParallelConfig(
                tensor_parallel_size=case["tp"],
                pipeline_parallel_size=case["pp"],
                enable_expert_parallel=case["ep"],
                decode_context_parallel_size=case.get("dcp", 1),
            )
            result["parallel_error"] = None
        except ValueError as exc:
            result["parallel_error"] = str(exc)
            results.append(result)
            continue
        try:
            model.verify_with_parallel_config(parallel)
            result["verify_error"] = None
        except (ValueError, NotImplementedError) as exc:
            result["verify_error"] = str(exc)
        result["kv_heads_per_rank"] = model.get_num_kv_heads(parallel)
        hf = model.hf_text_config
        expert_size = getattr(hf, "moe_intermediate_size", None)
        if case.get("moe_intermediate_size_key"):
            expert_size = getattr(hf, case["moe_intermediate_size_key"])
        if expert_size is not None:
            if case["dp"] == 1:
                moe = FusedMoEParallelConfig.make(
                    tp_size_=case["tp"],
                    pcp_size_=1,
                    dp_size_=1,
                    sp_size_=1,
                    vllm_parallel_config=parallel,
                )
                moe_tp = moe.tp_size
            elif case["ep"]:
                # make() needs a DP process group when dp > 1; with EP vLLM keeps experts
                # whole (tp_size 1), which make() shows for dp == 1 above.
                moe_tp = 1
            else:
                moe_tp, _ = FusedMoEParallelConfig.flatten_tp_across_dp_and_pcp(
                    case["tp"], case["dp"], 0, 1, 0
                )
            result["moe_tp_size"] = moe_tp
            block = case.get("block")
            if block is not None:
                try:
                    validate_fp8_block_shape_moe(expert_size // moe_tp, block)
                    result["fp8_moe_error"] = None
                except ValueError as exc:
                    result["fp8_moe_error"] = str(exc)
        results.append(result)
    return results


def dcp_engine_report(model_dir: str) -> dict[str, Any]:
    from vllm import LLM

    try:
        LLM(
            model=model_dir,
            tensor_parallel_size=2,
            decode_context_parallel_size=2,
            distributed_executor_backend="mp",
            enforce_eager=True,
            max_model_len=256,
            max_num_seqs=4,
            max_num_batched_tokens=256,
        )
    except Exception as exc:  # the refusal is the subject: report whatever vLLM raised
        chain = []
        current: BaseException | None = exc
        while current is not None:
            chain.append(f"{type(current).__name__}: {current}")
            current = current.__cause__ or current.__context__
        return {"started": False, "error": " <- ".join(chain)}
    return {"started": True, "error": None}


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    validators = sub.add_parser("validators")
    validators.add_argument("cases_json")
    engine = sub.add_parser("dcp-engine")
    engine.add_argument("model_dir")
    args = parser.parse_args()
    report: Any
    if args.mode == "validators":
        with open(args.cases_json, encoding="utf-8") as handle:
            report = validators_report(json.load(handle))
    else:
        report = dcp_engine_report(args.model_dir)
    print(REPORT_PREFIX + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
