"""Where a serving system's CPU time goes while a load level runs: CPU seconds per process
role (HTTP proxy, gateway replica, engine replica, vLLM engine core and worker, Ray daemons),
measured from /proc through psutil before and after the level.

On a 2-core machine every process of the serving path competes with the engine for the same
cores, so these seconds explain most of the gap to the in-process engine. Used by the
serving-comparison suite (`--cpu-breakdown`) and the relay-capacity suite.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import psutil

Scope = Callable[[], list[psutil.Process]]
"""The processes that make up one system right now (roots; their children are added)."""


def process_tree(roots: list[psutil.Process]) -> dict[int, psutil.Process]:
    found: dict[int, psutil.Process] = {}
    for root in roots:
        found[root.pid] = root
        with contextlib.suppress(psutil.Error):
            for child in root.children(recursive=True):
                found[child.pid] = child
    return found


def group_scope(pid: int) -> Scope:
    """A process group started with start_new_session (vLLM's server and its engine)."""

    def scope() -> list[psutil.Process]:
        roots = []
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if os.getpgid(proc.pid) == pid:
                    roots.append(proc)
        return roots

    return scope


def ray_session_scope(state_dir: Path) -> Scope:
    """Every process of the Ray head that Switchyard's `start_local_head` recorded."""

    def scope() -> list[psutil.Process]:
        marker = state_dir / "local_head.json"
        if not marker.exists():
            return []
        session = json.loads(marker.read_text()).get("session_dir")
        if not session:
            return []
        roots = []
        for proc in psutil.process_iter(["cmdline"]):
            if any(session in arg for arg in (proc.info.get("cmdline") or [])):
                roots.append(proc)
        return roots

    return scope


def role_of(proc: psutil.Process) -> str:
    """A short, stable label: Ray and vLLM set descriptive process titles."""
    try:
        name = proc.name()
        cmdline = proc.cmdline()
    except psutil.Error:
        return "gone"
    title = " ".join(cmdline) if cmdline else name
    if title.startswith("ray::") or title.startswith("VLLM::"):
        return title.split(" ")[0][:60]
    for daemon in ("raylet", "gcs_server", "dashboard.py", "log_monitor.py", "monitor.py"):
        if daemon in title:
            return daemon
    if "dashboard/agent.py" in title or "runtime_env/agent" in title:
        return "ray dashboard agents"
    if "vllm.entrypoints.openai.api_server" in title:
        return "vLLM API server"
    return name


def cpu_seconds(*scopes: Scope) -> dict[int, tuple[str, float]]:
    """(role, CPU seconds so far) of every process of `scopes`, by pid."""
    snapshot: dict[int, tuple[str, float]] = {}
    roots = [proc for scope in scopes for proc in scope()]
    for pid, proc in process_tree(roots).items():
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            snapshot[pid] = (role_of(proc), times.user + times.system)
    return snapshot


def cpu_by_role(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]
) -> dict[str, float]:
    """CPU seconds each role used between two snapshots (new processes count from zero)."""
    used: dict[str, float] = defaultdict(float)
    for pid, (role, seconds) in after.items():
        used[role] += seconds - (before[pid][1] if pid in before else 0.0)
    ranked = sorted(used.items(), key=lambda item: -item[1])
    return {role: round(s, 2) for role, s in ranked if s >= 0.01}


def own_cpu_seconds() -> float:
    """This process (the load generator) and its threads."""
    times = psutil.Process().cpu_times()
    return float(times.user + times.system)
