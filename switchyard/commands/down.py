"""`switchyard down`: stop what `switchyard up` started, in bounded time."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from domain.exit_codes import ExitCode


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "down",
        help="stop the stack `switchyard up` started (its local Ray head, or Switchyard's "
        "part of a joined cluster); says what it found and cleans the record",
    )
    parser.add_argument("--address", help="Ray cluster address (default: the one `up` used)")
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from switchyard.stack import read_stack_info
    from switchyard.stack_config import default_state_dir
    from switchyard.teardown import stack_down

    state_dir = args.state_dir or default_state_dir()
    info = read_stack_info(state_dir)
    found = stack_down(
        state_dir,
        args.address,
        lambda line: print(f"switchyard: {line}", flush=True),
        recorded_address=info.address if info else None,
    )
    if not found:
        print(f"switchyard: nothing to stop (no stack recorded in {state_dir})")
    return ExitCode.OK
