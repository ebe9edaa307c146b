"""Starts real vLLM on one miniature (at a given TP) and prints one JSON report line; run as
a subprocess.

vLLM's CPU engine spawns workers, so the engine must be created under `__main__`; the test
module runs this file with the test interpreter and reads the line starting with REPORT_PREFIX.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

REPORT_PREFIX = "ENGINE_PROBE_REPORT "


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir")
    parser.add_argument("--max-model-len", type=int, default=1024)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--enforce-eager", action="store_true")
    parser.add_argument("--tp", type=int, default=1)
    args = parser.parse_args()

    from vllm import LLM, SamplingParams

    started = time.monotonic()
    # The CPU platform refuses vLLM's Ray executor; TP ranks run as processes.
    extra: dict[str, Any] = {"distributed_executor_backend": "mp"} if args.tp > 1 else {}
    llm = LLM(
        model=args.model_dir,
        max_model_len=args.max_model_len,
        dtype="bfloat16",
        seed=0,
        enforce_eager=args.enforce_eager,
        tensor_parallel_size=args.tp,
        **extra,
    )
    engine_start_s = time.monotonic() - started
    params = SamplingParams(max_tokens=args.tokens, ignore_eos=True, temperature=0.0)
    started = time.monotonic()
    completion = llm.generate(["The switchyard sorts wagons"], params)[0]
    messages: list[Any] = [{"role": "user", "content": "Hello, which model are you?"}]
    chat = llm.chat(messages, params)[0]
    generate_s = time.monotonic() - started
    cache = llm.llm_engine.vllm_config.cache_config
    blocks = cache.num_gpu_blocks or 0
    report = {
        "engine_start_s": round(engine_start_s, 1),
        "generate_s": round(generate_s, 2),
        "completion_token_ids": list(completion.outputs[0].token_ids),
        "completion_text": completion.outputs[0].text,
        "chat_prompt": chat.prompt,
        "chat_token_ids": list(chat.outputs[0].token_ids),
        "num_gpu_blocks": blocks,
        "block_size": cache.block_size,
        "kv_cache_tokens": blocks * cache.block_size,
    }
    print(REPORT_PREFIX + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
