"""The `switchyard` CLI run against a suite's private stack (its own state directory)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SWITCHYARD = str(Path(sys.executable).with_name("switchyard"))


def stack_env(state: Path) -> dict[str, str]:
    """This process's environment aimed at the stack in `state`: `bench` and `status` find
    it through $SWITCHYARD_HOME, never through an outer $RAY_ADDRESS; no hub."""
    env = dict(os.environ)
    env["SWITCHYARD_HOME"] = str(state)
    env["HF_HUB_OFFLINE"] = "1"
    env.pop("RAY_ADDRESS", None)
    return env


def switchyard_cli(
    state: Path, *args: str, timeout_s: float = 1800, state_flag: bool = True
) -> subprocess.CompletedProcess[str]:
    """`switchyard ARGS` on the stack in `state`, echoed; its output shown when it fails."""
    print(f"$ switchyard {' '.join(args)}", flush=True)
    command = [SWITCHYARD, *args, *(["--state-dir", str(state)] if state_flag else [])]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout_s, env=stack_env(state),
        check=False,
    )  # fmt: skip
    if result.returncode != 0:
        print(result.stdout[-3000:], result.stderr[-3000:], sep="\n", flush=True)
    return result
