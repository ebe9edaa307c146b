"""The single `switchyard` entry point.

Each subcommand lives in `switchyard/commands/<name>.py` and exposes `register(subparsers)`.
Command modules import only the standard library at module level; heavy packages (ray,
vllm, torch) are imported inside the handler so `switchyard plan` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import import_module

from domain.exit_codes import (
    EndpointUnreachable,
    ExitCode,
    HeadUnavailable,
    Rejected,
    UserInputError,
)
from switchyard import __version__

# Order here is the order `switchyard --help` lists the commands in.
COMMAND_MODULES: tuple[str, ...] = (
    "up",
    "down",
    "status",
    "add",
    "swap",
    "remove",
    "park",
    "wake",
    "alias",
    "keys",
    "apply",
    "diff",
    "export",
    "fleet",
    "plan",
    "miniature",
    "stage",
    "cache",
    "bench",
    "metrics",
    "dashboards",
)

Handler = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    """argparse exits with 2 on bad usage already; keep its message to one line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(ExitCode.BAD_INPUT, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="switchyard",
        description="Run several huge LLMs on a Ray cluster behind one OpenAI endpoint.",
    )
    parser.add_argument("--version", action="version", version=f"switchyard {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subparsers.required = True
    for name in COMMAND_MODULES:
        module = import_module(f"switchyard.commands.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Before any command imports ray (it reads RAY_AUTH_MODE once, at import).
    from cluster.startup.ray_auth import apply_token_auth_default

    apply_token_auth_default()
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except UserInputError as exc:
        print(f"switchyard {args.command}: error: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except Rejected as exc:
        print(f"switchyard {args.command}: rejected: {exc}", file=sys.stderr)
        return ExitCode.REJECTED
    except HeadUnavailable as exc:
        print(f"switchyard {args.command}: head unavailable: {exc}", file=sys.stderr)
        return ExitCode.HEAD_UNAVAILABLE
    except EndpointUnreachable as exc:
        print(f"switchyard {args.command}: endpoint unreachable: {exc}", file=sys.stderr)
        return ExitCode.HEAD_UNAVAILABLE
    except KeyboardInterrupt:
        return 130
    finally:
        from cluster.startup.ray_runtime import disconnect

        disconnect()


if __name__ == "__main__":
    sys.exit(main())
