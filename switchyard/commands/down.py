"""`switchyard down`: stop what `switchyard up` started."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from domain.exit_codes import ExitCode


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("down", help="stop the stack `switchyard up` started")
    parser.add_argument("--address", help="Ray cluster address (default: the one `up` used)")
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from switchyard.stack import stack_down
    from switchyard.stack_config import default_state_dir

    state_dir = args.state_dir or default_state_dir()
    found = stack_down(state_dir, args.address, lambda line: print(f"switchyard: {line}"))
    if not found:
        print(f"switchyard: nothing to stop (no stack recorded in {state_dir})")
    return ExitCode.OK
