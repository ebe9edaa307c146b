"""The CLI's side of one fleet operation: find the cluster, send the operation through the
manager's client, print its progress as it happens, and map the outcome to an exit code.

Works the same from a terminal and under `ray job submit` (where Ray sets RAY_ADDRESS and
the job log shows the progress lines).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from domain.exit_codes import ExitCode, UserInputError
from domain.operation import OperationEvent
from domain.operation_request import OperationRequest

if TYPE_CHECKING:
    from cluster.clients.manager_client import ManagerApi


def resolve_address(address: str | None, state_dir: Path | None) -> str:
    import os

    from switchyard.stack import read_stack_info
    from switchyard.stack_config import default_state_dir

    if address:
        return address
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"]
    info = read_stack_info(state_dir or default_state_dir())
    if info is None:
        raise UserInputError(
            "--address: none given, RAY_ADDRESS is unset and no stack is recorded; "
            "start one with `switchyard up` or pass --address"
        )
    return info.address


def run_operation(address: str, request: OperationRequest, *, as_json: bool = False) -> int:
    """Send `request` to the manager at `address`, print progress as it happens, map the
    outcome."""
    from cluster.clients.manager_client import RayManagerClient
    from cluster.startup.ray_runtime import advertised_address

    document = sys.stdout
    if as_json:
        # Ray's driver prints cluster events (autoscaler and raylet lines) to whatever
        # sys.stdout is when they arrive; with --json stdout carries the document only.
        sys.stdout = sys.stderr
    manager = RayManagerClient.connect(address)
    if not as_json:
        # Which cluster and manager answered: several Ray clusters can share one machine. A
        # head started for 127.0.0.1 advertises the machine's address (docs/security.md).
        gcs = advertised_address()
        seen = address if gcs == address else f"{address} (it advertises {gcs})"
        print(f"connected to Ray at {seen} (manager {manager.identity()[:12]})", flush=True)
    return report_operation(manager, request, as_json=as_json, document=document)


def report_operation(
    manager: ManagerApi,
    request: OperationRequest,
    *,
    as_json: bool,
    document: TextIO | None = None,
) -> int:
    """Run `request` on `manager`, printing its events (or, with `as_json`, its result as
    one JSON document at the end, to `document`: stdout by default); the exit code of its
    outcome."""
    result = manager.run(request, None if as_json else print_event)
    if result is None:
        print(
            "failed: the manager died during the operation; it reconciles the fleet when it "
            "restarts (completes or rolls back, see its journal); check `switchyard status`",
            flush=True,
        )
        return ExitCode.REJECTED
    if as_json:
        out = document or sys.stdout
        out.write(json.dumps(result.model_dump(mode="json"), indent=2) + "\n")
        out.flush()
    else:
        if result.strategy is not None:
            print(f"strategy: {result.strategy.value} ({result.strategy_reason})")
        if result.phase_seconds:
            phases = ", ".join(f"{k} {v:.1f} s" for k, v in result.phase_seconds.items())
            print(f"phases: {phases}")
        print(f"{result.outcome.value}: {result.message}")
    sys.stdout.flush()
    return result.outcome.exit_code


def print_event(event: OperationEvent) -> None:
    stamp = time.strftime("%H:%M:%S", time.localtime(event.at))
    phase = f"[{event.phase}] " if event.phase else ""
    print(f"{stamp} {phase}{event.message}", flush=True)
