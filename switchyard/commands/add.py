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
    from domain.operation_request import SwapRequest

T = TypeVar("T")


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags shared by `add` and `swap`: what the new model is and how it is laid out."""
    parser.add_argument("--name", required=True, help="served model name")
    parser.add_argument("--alias", action="append", dest="aliases", default=[], metavar="ALIAS")
    parser.add_argument("--tp", type=int, default=1, help="tensor parallel size")
    parser.add_argument("--pp", type=int, default=1, help="pipeline parallel size")
    parser.add_argument("--dp", type=int, default=1, help="data parallel size")
    parser.add_argument("--ep", action="store_true", help="expert parallel")
    parser.add_argument("--max-model-len", type=int, default=None)
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

    engine: dict[str, Any] = {}
    if args.max_model_len is not None:
        engine["max_model_len"] = args.max_model_len
    try:
        config = ModelDeploymentConfig.model_validate(
            {
                "name": args.name,
                "source": args.source,
                "aliases": list(args.aliases),
                "layout": {"tp": args.tp, "pp": args.pp, "dp": args.dp, "ep": args.ep},
                "engine": engine,
            }
        )
    except ValidationError as exc:
        raise UserInputError(validation_line(exc, dotted(""))) from None
    parse_model_source(args.source)
    return config


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
    from switchyard.fleet_client import resolve_address, run_operation

    config = model_config(args)
    request: OperationRequest
    if args.replace:
        request = swap_request(args, args.replace, config)
    else:
        if args.strategy != "auto":
            raise UserInputError("--strategy: only meaningful with --replace OLD (a swap)")
        request = AddRequest(config=config, dry_run=args.dry_run)
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
        )
    )


def request_or_exit(build: Callable[[], T]) -> T:
    """A request built from flags; a bad value is a one-line input error (exit 2)."""
    from pydantic import ValidationError

    try:
        return build()
    except ValidationError as exc:
        raise UserInputError(validation_line(exc, dotted(""))) from None
