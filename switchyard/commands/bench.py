"""`switchyard bench`: load an OpenAI endpoint and report throughput and latency per level.

Numbers follow `vllm bench serve`'s definitions (switchyard/bench/metrics.py), so a sweep
against Switchyard compares with one against vLLM's own server.

`--during-swap` (issue 9, point 2) is not here yet: the swap does not exist. It will be a flag
of this command that runs `switchyard.bench.load.run_level` at a steady concurrency while it
triggers the swap; see that module's docstring for what it reads from the records.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from switchyard.exit_codes import ExitCode, UserInputError

DEFAULT_URL = "http://127.0.0.1:8000/v1"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="load an OpenAI endpoint: throughput and latency per concurrency",
        description="Send streamed /v1/completions requests with random prompts of exact token "
        "lengths (ignore_eos, so outputs are exact too), sweep the concurrency levels after a "
        "warm-up, and report request and token throughput, TTFT, TPOT, ITL and end-to-end "
        "latency (mean, p50, p90, p99) and errors per level, with vllm bench serve's "
        "definitions. Exits 1 when any measured request failed.",
    )
    parser.add_argument(
        "--url",
        help="OpenAI base URL (default: the local stack's endpoint, else " + DEFAULT_URL + ")",
    )
    parser.add_argument(
        "--model", default="default", help="served name or alias (default %(default)s)"
    )
    parser.add_argument(
        "--api-key",
        help="bearer token (default: $SWITCHYARD_API_KEY's first key, else $OPENAI_API_KEY)",
    )
    parser.add_argument(
        "--concurrency",
        default="1,8,32,128",
        metavar="N[,N...]",
        help="concurrency levels to sweep, in order (default 1,8,32,128)",
    )
    parser.add_argument(
        "--num-prompts", type=int, default=128, help="requests per level (default %(default)s)"
    )
    parser.add_argument(
        "--input-len", type=int, default=128, help="prompt tokens per request (default %(default)s)"
    )
    parser.add_argument(
        "--output-len", type=int, default=64, help="output tokens per request (default %(default)s)"
    )
    parser.add_argument(
        "--request-rate",
        type=float,
        default=float("inf"),
        metavar="PER_S",
        help="Poisson arrivals at this many requests/s (default inf: all at once, capped only "
        "by the concurrency)",
    )
    parser.add_argument(
        "--num-warmups",
        type=int,
        default=2,
        help="unmeasured requests before the sweep (default %(default)s)",
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the results as JSON")
    parser.add_argument(
        "--plot", type=Path, metavar="OUT.png", help="plot tok/s and TTFT vs concurrency"
    )
    parser.add_argument(
        "--tokenizer",
        type=Path,
        metavar="DIR",
        help="the model's tokenizer (default: found from the local stack's model source)",
    )
    parser.set_defaults(handler=run)


def parse_levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise UserInputError(
            f"--concurrency: {text!r} is not a comma-separated list of integers (e.g. 1,8,32,128)"
        ) from None
    return levels


def default_url(state_dir: Path) -> str:
    from switchyard.stack import read_stack_info

    info = read_stack_info(state_dir)
    return f"{info.endpoint}/v1" if info is not None else DEFAULT_URL


def default_api_key() -> str | None:
    keys = [k.strip() for k in os.environ.get("SWITCHYARD_API_KEY", "").split(",") if k.strip()]
    return keys[0] if keys else os.environ.get("OPENAI_API_KEY") or None


def build_config(args: argparse.Namespace, state_dir: Path) -> Any:
    from pydantic import ValidationError

    from switchyard.bench.config import FLAG_OF_FIELD, BenchConfig

    try:
        return BenchConfig(
            url=args.url or default_url(state_dir),
            model=args.model,
            api_key=args.api_key or default_api_key(),
            concurrency=parse_levels(args.concurrency),
            num_prompts=args.num_prompts,
            input_len=args.input_len,
            output_len=args.output_len,
            request_rate_per_s=args.request_rate,
            num_warmups=args.num_warmups,
            json_path=args.json,
            plot_path=args.plot,
            tokenizer_dir=args.tokenizer,
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else ""
        flag = FLAG_OF_FIELD.get(field, field or "bench")
        message = str(error["msg"]).removeprefix("Value error, ")
        raise UserInputError(f"{flag}: {message} (got {error.get('input')!r})") from None


def run(args: argparse.Namespace) -> int:
    import asyncio

    from rich.console import Console

    from switchyard.bench.client import Endpoint
    from switchyard.bench.plot import plot_series
    from switchyard.bench.progress_display import RichSweepProgress
    from switchyard.bench.prompts import exact_length_prompts
    from switchyard.bench.report import results_table, sweep_json, write_json
    from switchyard.bench.sweep import SweepPlan, run_sweep
    from switchyard.bench.tokenizer_source import load_tokenizer, locate_tokenizer
    from switchyard.stack_config import default_state_dir

    state_dir = default_state_dir()
    config = build_config(args, state_dir)
    # No emoji codes: a model named "miniature:llama" must print as typed.
    err = _wide(Console(stderr=True, emoji=False))
    location = locate_tokenizer(
        model=config.model, url=config.url, tokenizer_dir=config.tokenizer_dir, state_dir=state_dir
    )
    err.print(f"[dim]switchyard bench[/dim] tokenizer from {location.why}: {location.name_or_path}")
    tokenizer = load_tokenizer(location)
    try:
        prompts = exact_length_prompts(
            tokenizer,
            count=config.num_prompts + config.num_warmups,
            input_len=config.input_len,
            seed=config.seed,
        )
    except ValueError as exc:
        raise UserInputError(f"--input-len: {exc}") from None
    plan = SweepPlan(
        endpoint=Endpoint(config.url, config.model, config.api_key),
        prompts=tuple(prompts[config.num_warmups :]),
        warmup_prompts=tuple(prompts[: config.num_warmups]),
        output_len=config.output_len,
        concurrency=config.concurrency,
        request_rate_per_s=config.request_rate_per_s,
        seed=config.seed,
    )
    with RichSweepProgress(err) as progress:
        results = asyncio.run(run_sweep(plan, progress))
    levels = [r.metrics for r in results]
    title = (
        f"{config.model} at {config.url}: {config.num_prompts} requests per level, "
        f"{config.input_len} in / {config.output_len} out tokens"
    )
    _wide(Console(emoji=False)).print(results_table(levels, title))
    for level in levels:
        for error in level.errors:
            err.print(f"[red]concurrency {level.concurrency}:[/red] {error}")
    if config.json_path is not None:
        document = sweep_json(
            results,
            config=_public_config(config, location.name_or_path),
            prompt_tokens=[p.token_count for p in plan.prompts],
        )
        write_json(config.json_path, document)
        err.print(f"[dim]switchyard bench[/dim] wrote {config.json_path}")
    if config.plot_path is not None:
        plot_series(config.plot_path, {config.model: levels}, title=title)
        err.print(f"[dim]switchyard bench[/dim] wrote {config.plot_path}")
    return ExitCode.REJECTED if any(level.failed for level in levels) else ExitCode.OK


def _wide(console: Any) -> Any:
    if not console.is_terminal:
        console.width = 160  # a file or pipe: keep lines and table columns unwrapped
    return console


def _public_config(config: Any, tokenizer: str) -> dict[str, Any]:
    """The run's settings for the JSON record; never the API key."""
    settings: dict[str, Any] = config.model_dump(mode="json", exclude={"api_key"})
    settings["tokenizer"] = tokenizer
    return settings
