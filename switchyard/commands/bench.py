"""`switchyard bench`: load an OpenAI endpoint and report throughput and latency per level.

Numbers follow `vllm bench serve`'s definitions (switchyard/bench/level_metrics.py), so a sweep
against Switchyard compares with one against vLLM's own server.

`--during-swap OLD SOURCE --name NEW` runs one steady level instead of the sweep and
triggers `switchyard swap OLD SOURCE --name NEW` beside it, through the fleet manager in this
process (cluster/clients/manager_client.py), then reports what clients saw of the swap
(switchyard/bench/swap_window.py) and the swap's phases.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from domain.exit_codes import ExitCode, UserInputError

DEFAULT_URL = "http://127.0.0.1:8000/v1"
DEFAULT_LEVELS = "1,8,32,128"
DURING_SWAP_CONCURRENCY = 8


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
        metavar="N[,N...]",
        help="concurrency levels to sweep, in order (default 1,8,32,128); with --during-swap "
        f"one level (default {DURING_SWAP_CONCURRENCY})",
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
    swap = parser.add_argument_group(
        "load during a hot swap",
        "Run a steady load (--concurrency clients, each sending its next request when the last "
        "ended) against --model, trigger `switchyard swap OLD SOURCE --name NEW` after "
        "--swap-delay seconds, keep the load --swap-tail seconds after the swap ended, and "
        "report the unavailability clients saw, held requests, failed requests and the swap's "
        "phases. Exits 1 when the swap did not complete or any request failed.",
    )
    swap.add_argument(
        "--during-swap",
        nargs=2,
        metavar=("OLD", "SOURCE"),
        help="the swap to trigger: the serving model OLD and NEW's source "
        "(hub id[@rev], local dir or miniature:NAME)",
    )
    swap.add_argument("--name", help="NEW's served name (required with --during-swap)")
    swap.add_argument(
        "--swap-delay",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds of steady load before the swap (default %(default)s)",
    )
    swap.add_argument(
        "--swap-tail",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds of steady load after the swap ended (default %(default)s)",
    )
    swap.add_argument("--address", help="Ray address (default: $RAY_ADDRESS or `up`'s)")
    from switchyard.commands.add import add_strategy_argument

    add_strategy_argument(swap)
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

    from domain.validation_message import validation_line
    from switchyard.bench.bench_config import BenchConfig

    during_swap = _during_swap(args)
    levels = args.concurrency
    if levels is None:
        levels = str(DURING_SWAP_CONCURRENCY) if during_swap is not None else DEFAULT_LEVELS
    try:
        return BenchConfig(
            url=args.url or default_url(state_dir),
            model=args.model,
            api_key=args.api_key or default_api_key(),
            concurrency=parse_levels(levels),
            num_prompts=args.num_prompts,
            input_len=args.input_len,
            output_len=args.output_len,
            request_rate_per_s=args.request_rate,
            num_warmups=args.num_warmups,
            json_path=args.json,
            plot_path=args.plot,
            tokenizer_dir=args.tokenizer,
            during_swap=during_swap,
        )
    except ValidationError as exc:
        raise UserInputError(validation_line(exc, _flag_of)) from None


def _flag_of(loc: Sequence[str]) -> str:
    """The flag the user typed for a field; empty for a check across fields (it names its
    flags itself)."""
    from switchyard.bench.bench_config import FLAG_OF_FIELD, FLAG_OF_SWAP_FIELD

    if not loc:
        return ""
    flag = FLAG_OF_FIELD.get(loc[0], loc[0])
    if loc[0] == "during_swap" and len(loc) > 1:
        flag = FLAG_OF_SWAP_FIELD.get(loc[1], flag)
    return flag


def _during_swap(args: argparse.Namespace) -> dict[str, Any] | None:
    if args.during_swap is None:
        if args.name is not None:
            raise UserInputError("--name: only meaningful with --during-swap OLD SOURCE")
        return None
    if not args.name:
        raise UserInputError("--name: required with --during-swap (NEW's served name)")
    old, source = args.during_swap
    return {
        "old": old,
        "source": source,
        "new_name": args.name,
        "swap_delay_s": args.swap_delay,
        "swap_tail_s": args.swap_tail,
        "address": args.address,
        "strategy": args.strategy,
        "prefetch_weights": args.prefetch_weights,
        "deploy_early": args.deploy_early,
    }


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
    if config.during_swap is not None:
        return _run_during_swap(config, prompts, location.name_or_path, err)
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


def _run_during_swap(config: Any, prompts: list[Any], tokenizer: str, err: Any) -> int:
    import asyncio

    from rich.console import Console
    from rich.markup import escape

    from cluster.clients.manager_client import RayManagerClient
    from domain.operation_request import SwapRequest
    from switchyard.bench.client import Endpoint
    from switchyard.bench.during_swap import SwapLoadPlan, run_during_swap
    from switchyard.bench.progress_display import RichSwapProgress
    from switchyard.bench.report import write_json
    from switchyard.bench.swap_report import swap_json, swap_table
    from switchyard.commands.add import model_config
    from switchyard.operation_runner import resolve_address

    swap = config.during_swap
    new_config = model_config(
        argparse.Namespace(
            name=swap.new_name,
            source=swap.source,
            aliases=[],
            tp=1,
            pp=1,
            dp=1,
            ep=False,
            dcp=1,
            max_model_len=None,
        )
    )
    request = SwapRequest(
        old=swap.old,
        config=new_config,
        strategy=swap.strategy,
        prefetch_weights=swap.prefetch_weights,
        deploy_early=swap.deploy_early,
    )
    # Joined before the load starts, so connecting never stalls the load's first seconds.
    manager = RayManagerClient.connect(resolve_address(swap.address, None))
    plan = SwapLoadPlan(
        endpoint=Endpoint(config.url, config.model, config.api_key),
        prompts=tuple(p.text for p in prompts),
        prompt_tokens=tuple(p.token_count for p in prompts),
        output_len=config.output_len,
        concurrency=config.concurrency[0],
        new_model=swap.new_name,
        delay_s=swap.swap_delay_s,
        tail_s=swap.swap_tail_s,
    )
    with RichSwapProgress(err) as progress:
        result = asyncio.run(
            run_during_swap(plan, lambda on_event: manager.run(request, on_event), progress)
        )
    title = (
        f"{config.model} at {config.url} during swap {swap.old} -> {swap.new_name}: "
        f"concurrency {plan.concurrency}, {config.input_len} in / {config.output_len} out tokens"
    )
    _wide(Console(emoji=False)).print(swap_table(result, title))
    for error in result.window.errors:
        err.print(f"[red]failed request:[/red] {escape(error)}", highlight=False)
    if result.operation is not None:
        err.print(
            f"swap {result.operation.outcome.value}: {result.operation.message}", markup=False
        )
    if config.json_path is not None:
        write_json(config.json_path, swap_json(result, config=_public_config(config, tokenizer)))
        err.print(f"[dim]switchyard bench[/dim] wrote {config.json_path}")
    done = result.operation is not None and result.operation.succeeded
    return ExitCode.OK if done and result.window.failed == 0 else ExitCode.REJECTED


def _wide(console: Any) -> Any:
    if not console.is_terminal:
        console.width = 160  # a file or pipe: keep lines and table columns unwrapped
    return console


def _public_config(config: Any, tokenizer: str) -> dict[str, Any]:
    """The run's settings for the JSON record; never the API key."""
    settings: dict[str, Any] = config.model_dump(mode="json", exclude={"api_key"})
    settings["tokenizer"] = tokenizer
    return settings
