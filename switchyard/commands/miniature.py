"""`switchyard miniature NAME OUT_DIR`: write a small random-weight model vLLM serves on a CPU."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from domain.exit_codes import ExitCode, UserInputError

# Listed here rather than read from the catalog so `switchyard --help` does not import it.
MINIATURE_NAMES = ("kimi-k2.5", "minimax-m2.5", "llama")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "miniature",
        help="write a small random-weight model (Kimi-K2.5, MiniMax-M2.5 or Llama shaped)",
        description=(
            "Write a small random-weight Hugging Face model directory (config.json, "
            "model.safetensors, tokenizer with a chat template) that real vLLM loads and "
            "serves on the CPU. It keeps the real model's architecture class, attention kind, "
            "GQA ratio and MoE routing, shrinks the sizes, and records every difference in "
            "config.json under 'switchyard_miniature'. Nothing is downloaded."
        ),
    )
    parser.add_argument("name", choices=MINIATURE_NAMES, help="which real model to imitate")
    parser.add_argument(
        "out_dir", type=Path, metavar="OUT_DIR", help="model directory to create (missing or empty)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the random weights (default 0); same seed, same bytes",
    )
    parser.add_argument(
        "--corrupt",
        action="store_true",
        help="truncate the weights afterwards so vLLM refuses to load them (for rollback tests)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from cluster.miniature_generator import corrupt_weights, recipe_for, write_miniature

    recipe = recipe_for(args.name)
    started = time.monotonic()
    try:
        model_dir = write_miniature(args.name, args.out_dir, seed=args.seed)
    except FileExistsError:
        raise UserInputError(
            f"OUT_DIR {str(args.out_dir)!r} exists and is not empty; "
            "give a missing or empty directory"
        ) from None
    if args.corrupt:
        corrupt_weights(model_dir)
    elapsed_s = time.monotonic() - started
    weights_mib = sum(p.stat().st_size for p in model_dir.glob("*.safetensors")) / 2**20
    state = "CORRUPTED on purpose, vLLM will refuse it" if args.corrupt else "ok"
    print(f"{model_dir}")
    print(
        f"  {recipe.name}: {recipe.architecture} standing for {recipe.stands_for}, "
        f"seed {args.seed}, {recipe.parameter_count:,} parameters, "
        f"{weights_mib:.1f} MiB of weights ({state}), written in {elapsed_s:.1f} s"
    )
    return ExitCode.OK
