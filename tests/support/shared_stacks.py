"""The two stacks the suite shares across modules, started once per session.

- the real stack: Ray (a fault-tolerant head: `--gcs-store local`), Serve, the gateway and
  vLLM CPU engines on the Kimi and Llama miniatures (Kimi serves `default`, Llama
  `small`). For tests whose subject is the engine or the whole real path: serving, bad
  input against the engine, secure defaults, observability, the story's hot swap under
  load, a killed engine, a GCS outage.
- the fake stack: the same models and aliases on fake engine replicas (`up --fake-engines`,
  starting in a second) on a fault-tolerant head, two gateway replicas, an inventory file
  and a tenant keys file (`up --keys`: the suite's key as tenant `suite`, read from
  `SUITE_KEY_ENV`). For tests whose subject is the gateway, routing, holds, status,
  inventory or fleet operations.

Modules that change a stack (swaps, kills) run after those that only read it; the order is
tests/conftest.py's `MODULE_ORDER`. Each stack's state after each changing module is
written down in that module's docstring.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

from tests.support.running_stack import RunningStack
from tests.support.waiting import wait_until

API_KEY = "sk-switchyard-suite"
"""Every shared stack's endpoint key (tests send it; `wrong-key` tests send another)."""
KIMI = "mini-kimi-k2.5"
LLAMA = "mini-llama"
MINIMAX = "mini-minimax-m2.5"
MAX_MODEL_LEN = 256
"""The real stack's engines' context: small, so too-long requests are cheap to make."""


def _models() -> tuple[str, ...]:
    return (
        "--model",
        "miniature:kimi-k2.5",
        "--model",
        "miniature:llama",
        "--alias",
        "default",
        "--alias",
        "small",
    )


def inventory_file(state_dir: Path) -> Path:
    """Overrides of this node's probed RAM and cache disk, named by hostname (Ray may report
    any of the machine's addresses)."""
    path = state_dir / "inventory.yaml"
    path.write_text(
        f"overrides:\n  - node_name: {socket.gethostname()}\n"
        "    host_ram_gib: 64\n    disk_free_gib: 500\n"
    )
    return path


SUITE_KEY_ENV = "SWITCHYARD_SUITE_KEY"
"""The variable the fake stack's keys file reads the suite's key from (`key_env`)."""
ADMIN_KEY = "sy-operator-suite"
ADMIN_KEY_ENV = "SWITCHYARD_SUITE_ADMIN_KEY"
"""The variable the fake stack's `up --admin-key-env` reads its operator key from."""


def keys_file(state_dir: Path) -> Path:
    """The fake stack's tenants: only the suite's key, every model, no quota (the tenant
    tests reload others and put this file back)."""
    path = state_dir / "keys.yaml"
    path.write_text(f"keys:\n  - name: suite\n    key_env: {SUITE_KEY_ENV}\n")
    return path


def real_up_args() -> tuple[str, ...]:
    # A fault-tolerant head, as the fake stack's: test_gcs_outage_vllm.py kills its GCS, then the
    # whole head.
    return (*_models(), "--max-model-len", str(MAX_MODEL_LEN), "--gcs-store", "local")


def fake_up_args(state_dir: Path) -> tuple[str, ...]:
    # Two gateway replicas: the killed-gateway test needs a second one to keep the port. A
    # fault-tolerant head (a local Redis keeps the GCS's tables): the GCS outage test
    # kills its GCS.
    return (
        "--fake-engines",
        "--gcs-store",
        "local",
        *_models(),
        "--inventory",
        str(inventory_file(state_dir)),
        "--gateway-replicas",
        "2",
        "--keys",
        str(keys_file(state_dir)),
        "--admin-key-env",
        ADMIN_KEY_ENV,
        # Room for the sleep-mode models that take turns on the free slots: each rank of
        # an engine holds a CPU, asleep or awake.
        "--num-cpus",
        "12",
    )


METRICS_REPORT_INTERVAL_MS = 2000
"""Ray's metric export period on the shared stacks (default 10 s): Prometheus and the
manager's samples see a change within seconds, so tests wait less for them."""


def serving(state_dir: Path, up_args: tuple[str, ...]) -> Iterator[RunningStack]:
    """Start a stack with `up_args`, yield it, then stop it and check nothing is left. The
    suite's key goes in as `--api-key`, or, where `up_args` name a keys file, as the
    variable its entry reads."""
    with_keys_file = "--keys" in up_args
    running = RunningStack.on_free_ports(state_dir, api_key=None if with_keys_file else API_KEY)
    running.env["RAY_metrics_report_interval_ms"] = str(METRICS_REPORT_INTERVAL_MS)
    if with_keys_file:
        running.env[SUITE_KEY_ENV] = API_KEY
    if "--admin-key-env" in up_args:
        running.env[ADMIN_KEY_ENV] = ADMIN_KEY
    try:
        result = running.up(*up_args)
        assert result.returncode == 0, result.stdout + result.stderr
        yield running
    finally:
        down = running.down()
        assert down.returncode == 0, down.stdout + down.stderr
        wait_until(lambda: not running.processes(), 60, message="Ray processes left behind")
