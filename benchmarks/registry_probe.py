"""Read what a benchmark needs from a running stack over Ray, in a process of its own, so the
benchmark's process never becomes a Ray driver (a driver's threads would share its cores
during the measurements):

    python -m benchmarks.registry_probe RAY_ADDRESS [APP_PREFIX]
        # the direct URL and token of the first engine replica (of an app whose name starts
        # with APP_PREFIX): prints ["http://...", "token"]
    python -m benchmarks.registry_probe RAY_ADDRESS --manager-ready TIMEOUT_S
        # waits until the fleet manager answers `ping` (reconciled); exit 1 at the timeout
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from cluster.clients.registry_client import RayRegistryClient


def main(argv: list[str]) -> int:
    from cluster.startup.ray_auth import apply_token_auth_default

    # Before Ray is imported: it reads RAY_AUTH_MODE once, at import (as the CLI does).
    apply_token_auth_default()
    if len(argv) == 3 and argv[1] == "--manager-ready":
        return manager_ready(argv[0], float(argv[2]))
    prefix = argv[1] if len(argv) > 1 else ""
    found = [
        e for e in RayRegistryClient.connect(argv[0]).engine_endpoints()
        if e.app_name.startswith(prefix)
    ]  # fmt: skip
    if not found:
        print(
            f"the fleet registry has no engine endpoint of {prefix or 'any'} app", file=sys.stderr
        )
        return 1
    print(json.dumps([found[0].url, found[0].token]))
    return 0


def manager_ready(address: str, timeout_s: float) -> int:
    import ray

    from cluster.ray_adapters.manager_actor import manager_actor
    from cluster.startup.ray_runtime import connect

    connect(address)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if ray.get(manager_actor().ping.remote(), timeout=10):
                return 0
        except Exception:  # restarting: not found, or died with the call
            pass
        time.sleep(0.2)
    print("the manager did not answer ping in time", file=sys.stderr)
    return 1


def engine_endpoint(address: str, app_prefix: str = "") -> tuple[str, str]:
    """(URL, token) of the first engine replica (of an app named `app_prefix...`), read by
    this module in a process of its own."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.registry_probe", address, app_prefix],
        capture_output=True, text=True, check=False, cwd=Path(__file__).resolve().parents[1],
        timeout=120,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"reading the engine endpoint failed: {out.stderr[-2000:]}")
    url, token = json.loads(out.stdout.strip().splitlines()[-1])
    return str(url), str(token)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
