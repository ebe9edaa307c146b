"""The CLI's side of the fleet manager: connect, send one operation, stream its progress.

Works the same from a terminal and under `ray job submit` (where Ray sets RAY_ADDRESS and
the job log shows the progress lines).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from domain.exit_codes import ExitCode, UserInputError
from domain.operation import OperationEvent, OperationResult
from domain.operation_request import OperationRequest


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


def connect_manager(address: str) -> Any:
    """Join the cluster at `address` and return the fleet manager's actor handle."""
    from cluster.startup.ray_runtime import connect

    connect(address)
    from cluster.ray_adapters.manager_actor import manager_actor

    try:
        return manager_actor()
    except ValueError:
        raise UserInputError(
            f"no Switchyard manager runs on {address}; start `switchyard up`"
        ) from None


def follow_operation(
    manager: Any,
    request: OperationRequest,
    on_event: Callable[[OperationEvent], None] | None = None,
) -> OperationResult | None:
    """Run `request` on the manager, handing each progress event to `on_event` as it
    happens; the operation's result, or None when the manager died during it."""
    import ray

    pending = manager.run.remote(request)
    seen = 0
    while True:
        done, _ = ray.wait([pending], timeout=1.0)
        if on_event is not None:
            for event in ray.get(manager.events.remote(seen)):
                seen += 1
                on_event(event)
        if done:
            break
    try:
        result: OperationResult = ray.get(pending)
    except ray.exceptions.RayActorError:
        return None
    if on_event is not None:
        for event in result.events[seen:]:
            on_event(event)
    return result


def run_operation(address: str, request: OperationRequest, *, as_json: bool = False) -> int:
    """Send `request` to the manager, print progress as it happens, map the outcome."""
    manager = connect_manager(address)
    if not as_json:
        import ray

        # Which cluster and manager answered: several Ray clusters can share one machine. A
        # head started for 127.0.0.1 advertises the machine's address (docs/security.md).
        gcs = ray.get_runtime_context().gcs_address
        identity = ray.get(manager.identity.remote())
        seen = address if gcs == address else f"{address} (it advertises {gcs})"
        print(f"connected to Ray at {seen} (manager {identity[:12]})", flush=True)
    result = follow_operation(manager, request, None if as_json else print_event)
    if result is None:
        print(
            "failed: the manager died during the operation; it reconciles the fleet when it "
            "restarts (completes or rolls back, see its journal); check `switchyard status`",
            flush=True,
        )
        return ExitCode.REJECTED
    if as_json:
        print(json.dumps(result.model_dump(mode="json"), indent=2))
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
