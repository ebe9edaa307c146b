"""Asks the installed vLLM what it decides about layouts and KV caches; run as a subprocess.

One mode, printing one line that starts with REPORT_PREFIX followed by JSON:

- `validators CASES_JSON`: for each (model dir, tp, pp, dp, ep) case, run vLLM's config-level
  validators that need no GPU: `ModelConfig.verify_with_parallel_config` (heads % TP, expert
  parallel needs experts, pipeline support), `ModelConfig.get_num_kv_heads` (KV heads per
  rank), the fused-MoE split (`FusedMoEParallelConfig.make` / `flatten_tp_across_dp_and_pcp`)
  and `validate_fp8_block_shape_moe` on the resulting per-rank expert size, inside a
  one-process gloo group.
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
        parallel = ParallelConfig(
            tensor_parallel_size=case["tp"],
            pipeline_parallel_size=case["pp"],
            enable_expert_parallel=case["ep"],
        )
        result: dict[str, Any] = dict(case)
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


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    validators = sub.add_parser("validators")
    validators.add_argument("cases_json")
    args = parser.parse_args()
    with open(args.cases_json, encoding="utf-8") as handle:
        report = validators_report(json.load(handle))
    print(REPORT_PREFIX + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
