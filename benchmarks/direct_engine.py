"""The ceiling: vLLM's AsyncLLM called in-process, no HTTP, no proxy, no gateway.

Run by the serving-comparison suite in its own process (vLLM spawns its engine-core
worker, so the engine must be created under `__main__`). It sends the same prompts, with the
same concurrency cap and the same `ignore_eos` lengths, and times every streamed delta the way
the HTTP client times chunks, so `switchyard.bench.level_metrics` summarizes both alike. Prompts
go in as token ids (the servers tokenize the same text to the same ids).

    python -m benchmarks.direct_engine --model-dir DIR --prompts prompts.json \
        --output-len 64 --concurrency 1,32,128 --num-warmups 8 --out direct.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from switchyard.bench.level_metrics import LevelMetrics, summarize
from switchyard.bench.request_record import RequestRecord, failed_record


async def one_request(
    engine: Any, token_ids: list[int], output_len: int, request_id: str
) -> RequestRecord:
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    params = SamplingParams(
        max_tokens=output_len, ignore_eos=True, output_kind=RequestOutputKind.DELTA
    )
    start = time.perf_counter()
    times: list[float] = []
    tokens = 0
    prompt_tokens: int | None = None
    try:
        async for output in engine.generate({"prompt_token_ids": token_ids}, params, request_id):
            now = time.perf_counter()
            new = len(output.outputs[0].token_ids)
            if new:
                times.append(now)
                tokens += new
            if output.prompt_token_ids is not None:
                prompt_tokens = len(output.prompt_token_ids)
    except Exception as exc:
        return failed_record(start, f"{type(exc).__name__}: {exc}"[:300])
    if not times:
        return failed_record(start, "the engine returned no token")
    return RequestRecord(start, tuple(times), prompt_tokens, tokens)


async def run_level(
    engine: Any, prompts: list[list[int]], output_len: int, concurrency: int, tag: str
) -> tuple[list[RequestRecord], float]:
    slots = asyncio.Semaphore(concurrency)

    async def limited(i: int, ids: list[int]) -> RequestRecord:
        async with slots:
            return await one_request(engine, ids, output_len, f"{tag}-{i}")

    started = time.perf_counter()
    records = await asyncio.gather(*(limited(i, ids) for i, ids in enumerate(prompts)))
    return list(records), time.perf_counter() - started


async def sweep(args: argparse.Namespace) -> dict[str, Any]:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    prompts = json.loads(Path(args.prompts).read_text())
    ids: list[list[int]] = [p["token_ids"] for p in prompts]
    warmups, measured = ids[: args.num_warmups], ids[args.num_warmups :]
    launched = time.perf_counter()
    engine = AsyncLLM.from_engine_args(
        AsyncEngineArgs(
            model=args.model_dir,
            served_model_name=args.name,
            **json.loads(args.engine_args or '{"enforce_eager": true}'),
        )
    )
    start_s = time.perf_counter() - launched
    try:
        if warmups:
            await run_level(engine, warmups, args.output_len, len(warmups), "warmup")
        levels = []
        for level in (int(c) for c in args.concurrency.split(",")):
            records, duration = await run_level(
                engine, measured, args.output_len, level, f"c{level}"
            )
            metrics = summarize(
                records,
                duration_s=duration,
                concurrency=level,
                request_rate_per_s=None,
                prompt_tokens=[len(p) for p in measured],
            )
            print(
                f"direct: concurrency {level}: {metrics.output_tokens_per_s:,.1f} tok/s, "
                f"{metrics.failed} failed",
                flush=True,
            )
            levels.append(LevelMetrics.to_json(metrics))
    finally:
        engine.shutdown()
        # Collect it now: its __del__ shuts down again and fails once interpreter exit has
        # torn down the module globals it calls.
        del engine
    return {"start_s": start_s, "levels": levels}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--name", default="model")
    parser.add_argument("--prompts", required=True, help="JSON list of {token_ids: [...]}")
    parser.add_argument("--output-len", type=int, required=True)
    parser.add_argument("--concurrency", required=True)
    parser.add_argument("--num-warmups", type=int, default=0)
    parser.add_argument("--out", required=True)
    parser.add_argument("--engine-args", default="", help="AsyncEngineArgs fields, as JSON")
    args = parser.parse_args()
    result = asyncio.run(sweep(args))
    Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
