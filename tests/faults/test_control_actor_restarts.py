"""Switchyard's long-lived actors, each killed with SIGKILL under load on the fake stack
(real Ray, Serve, gateways, registry and manager; fake engine replicas): the registry, whose
routing table every request resolves against, and the fleet manager. Ray restarts each; no
request fails, and each comes back with its state: the registry with the table it had
(same version, so the gateways never see an empty or older one), the manager with the
fleet as its journal has it. Every test prints a `FIGURE` line for RELIABILITY.md.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import psutil
import pytest

from tests.support import shared_stacks
from tests.support.running_stack import RunningStack
from tests.support.status_load import RequestOutcome, StatusLoad, describe_failures
from tests.support.waiting import wait_until

API_KEY = shared_stacks.API_KEY
AUTH = {"Authorization": f"Bearer {API_KEY}"}
CLIENTS = 4


@pytest.fixture(scope="module")
def stack(fake_stack: RunningStack) -> RunningStack:
    return fake_stack


def _actor_process(stack: RunningStack, title: str) -> psutil.Process | None:
    """The worker process of the actor whose class is `title` (Ray names it `ray::Class`)."""
    for proc in stack.processes():
        try:
            if any(part.startswith(f"ray::{title}") for part in proc.cmdline()):
                return proc
        except psutil.NoSuchProcess:
            continue
    return None


def _fleet_view(stack: RunningStack) -> dict[str, Any]:
    status = stack.status()
    models = {m["name"]: (m["state"], m["app"]) for m in status["models"]}  # type: ignore[attr-defined]
    return {
        "models": models,
        "aliases": status["aliases"],
        "version": status["routing_table_version"],
        "endpoint": status["endpoint"],
    }


def _listed_models(stack: RunningStack) -> set[str]:
    answer = httpx.get(f"{stack.base_url}/models", headers=AUTH, timeout=30)
    answer.raise_for_status()
    return {m["id"] for m in answer.json()["data"]}


def _kill_under_load(
    stack: RunningStack, title: str, *, back: Any
) -> tuple[list[RequestOutcome], float]:
    """SIGKILL actor `title` while CLIENTS clients stream; (outcomes, seconds until `back`)."""
    victim = _actor_process(stack, title)
    assert victim is not None, f"no ray::{title} process"
    with StatusLoad(stack.base_url, "default", workers=CLIENTS, api_key=API_KEY) as load:
        wait_until(lambda: sum(o.ok for o in load.snapshot()) >= 8, 120)
        killed_at = time.monotonic()
        victim.kill()

        def restarted() -> bool:
            proc = _actor_process(stack, title)
            return proc is not None and proc.pid != victim.pid and bool(back())

        wait_until(restarted, 180, 0.5, message=f"ray::{title} did not come back")
        back_s = time.monotonic() - killed_at
        time.sleep(3)  # traffic after the restart, too
    outcomes = load.stop()
    return outcomes, back_s


def test_a_killed_registry_loses_no_request_and_comes_back_with_its_table(
    stack: RunningStack,
) -> None:
    before = _fleet_view(stack)
    listed = _listed_models(stack)
    assert before["models"] and before["aliases"], before

    def serving_its_table() -> bool:
        try:
            return _fleet_view(stack) == before
        except Exception:
            return False

    outcomes, back_s = _kill_under_load(stack, "FleetRegistry", back=serving_its_table)

    assert outcomes and all(o.ok for o in outcomes), describe_failures(outcomes)
    assert _fleet_view(stack) == before  # same table version: nothing was republished
    assert _listed_models(stack) == listed
    health = httpx.get(f"{stack.base_url.removesuffix('/v1')}/health", timeout=30).json()
    assert health["routing_table_version"] == before["version"], health
    print(
        f"\nFIGURE registry-kill: back with table version {before['version']} in "
        f"{back_s:.1f} s; {len(outcomes)} requests from {CLIENTS} clients, 0 failed"
    )


def test_a_killed_manager_loses_no_request_and_comes_back_with_the_fleet(
    stack: RunningStack,
) -> None:
    before = _fleet_view(stack)
    exported = stack.cli("export")  # the manager's fleet, each model as it was asked for
    assert exported.returncode == 0, exported.stderr

    def managing() -> bool:
        try:
            return stack.cli("export", timeout_s=60).stdout == exported.stdout
        except Exception:
            return False

    outcomes, back_s = _kill_under_load(stack, "ManagerService", back=managing)

    assert outcomes and all(o.ok for o in outcomes), describe_failures(outcomes)
    after = _fleet_view(stack)
    assert after["models"] == before["models"] and after["aliases"] == before["aliases"]
    print(
        f"\nFIGURE manager-kill: back in {back_s:.1f} s with the fleet unchanged; "
        f"{len(outcomes)} requests from {CLIENTS} clients, 0 failed"
    )
