"""`switchyard add SOURCE --name N`: admit and deploy a model (optionally replacing one)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from domain.exit_codes import UserInputError
from domain.validation_message import dotted, validation_line

if TYPE_CHECKING:
    from domain.deployment_config import ModelDeploymentConfig
    from domain.fleet_file import FleetModelEntry
    from domain.operation_request import SwapRequest

T = TypeVar("T")


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags shared by `add` and `swap`: what the new model is and how it is laid out."""
    parser.add_argument("--name", required=True, help="served model name")
    parser.add_argument("--alias", action="append", dest="aliases", default=[], metavar="ALIAS")
    parser.add_argument("--tp", type=int, default=None, help="tensor parallel size (default 1)")
    parser.add_argument("--pp", type=int, default=None, help="pipeline parallel size (default 1)")
    parser.add_argument(
        "--dp",
        type=int,
        default=None,
        help="vLLM data parallel size (default 1; not deployed yet: use replicas for copies)",
    )
    parser.add_argument("--ep", action="store_true", help="expert parallel")
    parser.add_argument(
        "--replicas",
        type=int,
        default=None,
        metavar="N",
        help="engine copies, each with the whole layout, each possibly on another node; "
        "requests sharing a prompt_cache_key (or user) stick to one (default 1)",
    )
    parser.add_argument(
        "--dcp", type=int, default=None, help="decode context parallel size (default 1)"
    )
    parser.add_argument(
        "--layout",
        choices=("auto",),
        default=None,
        help="auto: deploy admission's recommended layout for --objective (instead of "
        "--tp/--pp/--dp/--ep/--dcp)",
    )
    parser.add_argument(
        "--objective",
        choices=("latency", "throughput"),
        default=None,
        help="what --layout auto optimises (default throughput)",
    )
    parser.add_argument("--max-model-len", type=int, default=None)
    parser.add_argument(
        "--engine-arg",
        action="append",
        dest="engine_args",
        default=[],
        metavar="KEY=VALUE",
        help="a vLLM engine setting (repeatable): an engine field of the fleet file "
        "(max_num_seqs=64, tool_call_parser=kimi_k2) or any other vLLM argument "
        "(block_size=32); VALUE is read as a YAML scalar or flow mapping",
    )
    parser.add_argument(
        "--residency",
        choices=("always", "on_demand"),
        default=None,
        help="always (default: resident until changed) or on_demand (parked when idle or to "
        "make room, woken by the next request)",
    )
    parser.add_argument(
        "--park-after-idle-s",
        type=float,
        default=None,
        help="on_demand: park after this long without a request (default 600)",
    )
    parser.add_argument(
        "--min-resident-s",
        type=float,
        default=None,
        help="on_demand: never parked to make room before it has served this long (default 60)",
    )
    parser.add_argument(
        "--park-mode",
        choices=("unload", "sleep"),
        default=None,
        help="unload (default: the engine is removed, a wake is a cold start) or sleep "
        "(vLLM's sleep mode: the engine process stays; refused where the platform has none)",
    )
    parser.add_argument(
        "--sleep-level",
        type=int,
        choices=(1, 2),
        default=None,
        help="--park-mode sleep: 1 (default: weights kept in pinned host memory) or 2 "
        "(weights discarded, reloaded from the node's weight cache on wake)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--address", help="Ray address (default: $RAY_ADDRESS or `up`'s)")
    parser.add_argument("--state-dir", type=Path, default=None)


def add_strategy_argument(parser: argparse.ArgumentParser) -> None:
    """`--strategy` of every command that swaps (`swap`, `add --replace`, `bench
    --during-swap`)."""
    parser.add_argument(
        "--strategy",
        choices=("auto", "make-before-break", "break-before-make"),
        default="auto",
        help="make-before-break: NEW starts beside OLD and the aliases move at once "
        "(nothing held; needs room for both); break-before-make: OLD's aliases are held "
        "while OLD frees its accelerators for NEW; auto (default): the first that fits",
    )
    parser.add_argument(
        "--no-prefetch",
        dest="prefetch_weights",
        action="store_false",
        help="break-before-make: do not read NEW's weights into the page cache before the "
        "hold (done by default when the node's available memory covers them)",
    )
    parser.add_argument(
        "--no-early-deploy",
        dest="deploy_early",
        action="store_false",
        help="break-before-make: deploy NEW only once OLD's accelerators are seen free "
        "(by default NEW's app is created before OLD is deleted and waits for them)",
    )


def model_config(args: argparse.Namespace) -> ModelDeploymentConfig:
    """A validated deployment config. The accelerator is left unset: the cluster decides
    it (the manager fills in fields a request leaves unset)."""
    from pydantic import ValidationError

    from domain.deployment_config import ModelDeploymentConfig
    from domain.model_source import parse_model_source

    _check_layout_flags(args)
    engine = engine_settings(getattr(args, "engine_args", []))
    if args.max_model_len is not None:
        if "max_model_len" in engine:
            raise UserInputError(
                "--max-model-len: also given as --engine-arg max_model_len; give it once"
            )
        engine["max_model_len"] = args.max_model_len
    try:
        config = ModelDeploymentConfig.model_validate(
            {
                "name": args.name,
                "source": args.source,
                "aliases": list(args.aliases),
                "layout": {
                    "tp": 1 if args.tp is None else args.tp,
                    "pp": 1 if args.pp is None else args.pp,
                    "dp": 1 if args.dp is None else args.dp,
                    "ep": args.ep,
                    "dcp": 1 if getattr(args, "dcp", None) is None else args.dcp,
                },
                "engine": engine,
                "replicas": 1 if getattr(args, "replicas", None) is None else args.replicas,
            }
        )
    except ValidationError as exc:
        raise UserInputError(validation_line(exc, dotted(""))) from None
    parse_model_source(args.source)
    from switchyard.engine_args import check_engine_config

    check_engine_config(config.engine, "--engine-arg")
    return config


def _check_layout_flags(args: argparse.Namespace) -> None:
    auto = getattr(args, "layout", None) == "auto"
    if auto:
        given = [
            f"--{flag}"
            for flag in ("tp", "pp", "dp", "dcp")
            if getattr(args, flag, None) is not None
        ] + (["--ep"] if getattr(args, "ep", False) else [])
        if given:
            raise UserInputError(
                f"--layout auto: admission chooses the layout; drop {', '.join(given)}"
            )
    elif getattr(args, "objective", None) is not None:
        raise UserInputError("--objective: only meaningful with --layout auto")


RESIDENCY_FLAGS = {
    "residency": "--residency",
    "park_after_idle_s": "--park-after-idle-s",
    "min_resident_s": "--min-resident-s",
    "park_mode": "--park-mode",
    "sleep_level": "--sleep-level",
}


def fleet_entry(args: argparse.Namespace, config: ModelDeploymentConfig) -> FleetModelEntry | None:
    """The fleet entry of a `--layout auto` request (admission resolves it at deploy, for
    `--objective`) or of one with residency flags; None otherwise (the manager makes the
    entry itself). A bad residency value is a one-line input error naming its flag."""
    from pydantic import ValidationError

    from domain.fleet_file import FleetModelEntry

    residency = {
        key: getattr(args, key) for key in RESIDENCY_FLAGS if getattr(args, key, None) is not None
    }
    auto = getattr(args, "layout", None) == "auto"
    if not auto and not residency:
        return None
    written = FleetModelEntry.of_config(config).written()
    if auto:
        written["layout"] = "auto"
        written["objective"] = args.objective or "throughput"
    try:
        return FleetModelEntry.model_validate({**written, **residency})
    except ValidationError as exc:
        # Named by its flag: "--park-mode: 'sleep' is not allowed (...)".
        line = validation_line(exc, dotted("")).removeprefix("config: ")
        key, sep, rest = line.partition(":")
        if sep and key in RESIDENCY_FLAGS:
            line = RESIDENCY_FLAGS[key] + ":" + rest
        raise UserInputError(line) from None


def engine_settings(items: list[str]) -> dict[str, Any]:
    """`--engine-arg KEY=VALUE`s as an `engine:` section: typed fields by name, any other
    vLLM argument under `extra` (validated with the rest of the config)."""
    import yaml

    from domain.deployment_config import EngineConfig

    engine: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserInputError(f"--engine-arg {item!r}: use KEY=VALUE, e.g. max_num_seqs=64")
        if "-" in key:
            raise UserInputError(
                f"--engine-arg {key}: names use underscores ({key.replace('-', '_')})"
            )
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            raise UserInputError(
                f"--engine-arg {key}: {raw!r} is not a YAML scalar or flow mapping"
            ) from None
        if key == "extra" or (key in EngineConfig.model_fields and key in engine):
            raise UserInputError(f"--engine-arg {key}: not allowed (or given twice)")
        if key in EngineConfig.model_fields:
            engine[key] = value
        else:
            extra = engine.setdefault("extra", {})
            if key in extra:
                raise UserInputError(f"--engine-arg {key}: given twice")
            extra[key] = value
    return engine


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "add", help="admit and deploy a model; --replace OLD hot-swaps it in for OLD"
    )
    parser.add_argument("source", help="hub id[@rev], local dir or miniature:NAME")
    parser.add_argument("--replace", metavar="OLD", help="swap out this model (its aliases move)")
    add_model_arguments(parser)
    add_strategy_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from domain.operation_request import AddRequest, OperationRequest
    from switchyard.operation_runner import resolve_address, run_operation

    config = model_config(args)
    request: OperationRequest
    if args.replace:
        request = swap_request(args, args.replace, config)
    else:
        if args.strategy != "auto":
            raise UserInputError("--strategy: only meaningful with --replace OLD (a swap)")
        request = AddRequest(config=config, dry_run=args.dry_run, entry=fleet_entry(args, config))
    address = resolve_address(args.address, args.state_dir)
    return run_operation(address, request, as_json=args.json)


def swap_request(args: argparse.Namespace, old: str, config: ModelDeploymentConfig) -> SwapRequest:
    """The swap `swap OLD ...` and `add ... --replace OLD` ask for, with the strategy flags
    of `add_strategy_argument`."""
    from domain.operation_request import SwapRequest

    return request_or_exit(
        lambda: SwapRequest(
            old=old,
            config=config,
            dry_run=args.dry_run,
            strategy=args.strategy,
            prefetch_weights=args.prefetch_weights,
            deploy_early=args.deploy_early,
            entry=fleet_entry(args, config),
        )
    )


def request_or_exit(build: Callable[[], T]) -> T:
    """A request built from flags; a bad value is a one-line input error (exit 2)."""
    from pydantic import ValidationError

    try:
        return build()
    except ValidationError as exc:
        raise UserInputError(validation_line(exc, dotted(""))) from None
