"""`apply`: carry a fleet file's plan out as the manager's journaled operations, in order.

The plan is judged first (cluster/fleet/fleet_plan.py); a plan with any refused step runs nothing.
Then each step is one ordinary operation (remove, swap, add, alias), with its holds, drains
and rollbacks, one at a time; the first that does not end `done` stops the apply with the
fleet consistent (every operation is whole or undone), and the report says what was done and
what was not. Applying the same file again finds nothing to do. The manager's journal
records each apply: the file's sha256, who ran it, its steps, and how it ended.
"""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domain.exit_codes import ExitCode
from domain.fleet_file import FleetFile
from domain.operation import Outcome
from domain.operation_request import (
    AddRequest,
    AliasRequest,
    OperationRequest,
    RemoveRequest,
    ResidencyRequest,
    SwapRequest,
)
from domain.tenant_keys import TenantTable, resolve_entries, table_of

if TYPE_CHECKING:
    from cluster.clients.manager_client import ManagerApi
    from cluster.clients.registry_client import RegistryApi


def operator_identity() -> str:
    """Who runs this: the Ray job's submission id under `ray job submit`, else the OS user."""
    raw = os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR")
    if raw:
        try:
            submission = json.loads(raw).get("metadata", {}).get("job_submission_id")
        except ValueError:
            submission = None
        if submission:
            return f"ray job {submission}"
    try:
        return f"user {getpass.getuser()}"
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


def step_request(change: dict[str, Any], desired: FleetFile) -> OperationRequest:
    """The operation that carries out one planned change."""
    action, model = change["action"], change["model"]
    if action == "remove":
        return RemoveRequest(name=model)
    if action == "alias":
        return AliasRequest(alias=change["alias"], name=model)
    entry = desired.model(model)
    assert entry is not None, f"{model} is in the plan, so in the file"
    if action == "swap":
        return SwapRequest(old=change["replaces"], config=entry.deployment(), entry=entry)
    if action == "residency":
        return ResidencyRequest(name=model, entry=entry)
    return AddRequest(config=entry.deployment(), entry=entry)


def apply_fleet(
    manager: ManagerApi,
    registry: Callable[[], RegistryApi],
    path: Path,
    desired: FleetFile,
    sha256: str,
    *,
    tenants: TenantTable | None,
    dry_run: bool,
    as_json: bool,
) -> int:
    """Plan, then (unless `dry_run`) run the plan's steps; the exit code. `tenants`: the
    file's `gateway.keys`, resolved by the caller before it connects (so an unset key_env
    changes nothing), handed to every gateway replica through `registry`, which is asked for
    only then; None leaves the gateways' keys as they are (`up -f` started them with the
    file's)."""
    from switchyard.commands.diff import print_plan
    from switchyard.operation_runner import print_event

    plan = manager.plan_fleet(desired).to_json()
    if tenants is not None and plan["admitted"] and not dry_run:
        # Every gateway replica takes the table through the fleet registry.
        registry().set_tenants(tenants)
    if dry_run or not plan["admitted"] or not plan["changes"]:
        if not as_json:
            print_plan(plan, as_json=False)
        report = {"sha256": sha256, "plan": plan, "steps": [], "done": plan["admitted"]}
        if as_json:
            print(json.dumps(report, indent=2))
        return ExitCode.OK if plan["admitted"] else ExitCode.REJECTED
    by = operator_identity()
    changes = plan["changes"]
    if not as_json:
        print_plan(plan, as_json=False)
        print(f"applying {path} (sha256 {sha256[:12]}) as {by}", flush=True)
    record = {"file": str(path), "sha256": sha256, "by": by}
    manager.record_apply({**record, "phase": "start", "steps": len(changes)})
    steps: list[dict[str, Any]] = []
    stopped: str | None = None
    for i, change in enumerate(changes, 1):
        request = step_request(change, desired)
        if not as_json:
            print(f"step {i}/{len(changes)}: {change['action']} {change['model']}", flush=True)
        result = manager.run(request, None if as_json else print_event)
        outcome = "failed" if result is None else result.outcome.value
        message = "the manager died during the operation" if result is None else result.message
        steps.append({**_step_key(change), "outcome": outcome, "message": message})
        if result is None or result.outcome is not Outcome.DONE:
            stopped = f"step {i} ({change['action']} {change['model']}) {outcome}: {message}"
            break
    not_done = [_step_key(c) for c in changes[len(steps) :]]
    manager.record_apply(
        {**record, "phase": "end", "done": stopped is None, "steps_done": len(steps)}
    )
    if as_json:
        print(
            json.dumps(
                {
                    "sha256": sha256,
                    "by": by,
                    "plan": plan,
                    "steps": steps,
                    "not_done": not_done,
                    "done": stopped is None,
                },
                indent=2,
            )
        )
    elif stopped is None:
        print(f"applied: {len(steps)} step(s) done; the fleet matches {path}")
    else:
        print(f"stopped at {stopped}")
        print(f"done: {sum(1 for s in steps if s['outcome'] == 'done')} step(s); not done:")
        for key in not_done:
            print(f"  {key['action']} {key['model']}")
    return ExitCode.OK if stopped is None else ExitCode.REJECTED


def _step_key(change: dict[str, Any]) -> dict[str, Any]:
    keys = ("action", "model", "replaces", "alias")
    return {k: change[k] for k in keys if change.get(k) is not None}


def fleet_tenants(desired: FleetFile, path: Path) -> TenantTable | None:
    """The file's `gateway.keys` resolved in this process's environment; None if absent."""
    if desired.gateway.keys is None:
        return None
    entries = desired.gateway.keys
    return table_of(resolve_entries(entries, os.environ, where="gateway.keys"), str(path))
