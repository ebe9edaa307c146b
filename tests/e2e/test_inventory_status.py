"""The cluster inventory through the CLI: `up --inventory FILE` overrides probed values,
`status` shows every node's hardware (JSON and table, overrides marked), and
`add --dry-run` reports the weights' real size and each node's disk verdict, changing
nothing. `status` reads the same document through the gateway's operator route, locally
and with `--url` from a process that cannot even import Ray.

On the fake stack (tests/support/shared_stacks.py): the inventory is the subject, not the
engines. It only reads the stack.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.running_stack import (
    SWITCHYARD,
    RunningStack,
    stack_env,
)
from tests.support.shared_stacks import ADMIN_KEY, ADMIN_KEY_ENV, API_KEY
from tests.support.status_load import StatusLoad
from tests.support.waiting import wait_until

GIB = 2**30


@pytest.fixture(scope="module")
def stack(fake_stack: RunningStack) -> RunningStack:
    """The fake stack, started with shared_stacks.inventory_file's overrides of this node's
    RAM (64 GiB) and cache disk (500 GiB free)."""
    return fake_stack


def _cli(stack: RunningStack, *args: str) -> subprocess.CompletedProcess[str]:
    env = stack_env(stack.state_dir)
    # Wide enough that rich keeps each table row on one line when piped.
    env["COLUMNS"] = "200"
    return subprocess.run(
        [SWITCHYARD, *args, "--state-dir", str(stack.state_dir)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )


def test_status_json_has_the_probed_inventory_with_overrides_marked(stack: RunningStack) -> None:
    inventory = stack.status()["inventory"]
    assert isinstance(inventory, dict)
    # A fault-tolerant head (the fake stack's) declares no slots: its data node does.
    (node,) = [n for n in inventory["nodes"] if n["accelerator"] == "standin"]
    assert [n["accelerator"] for n in inventory["nodes"] if n is not node] == ["none"]
    assert node["hostname"] == socket.gethostname()
    assert node["node_ip"]
    assert (node["accelerator"], node["gpu_model"], node["gpu_count"]) == (
        "standin",
        "cpu-standin",
        4,
    )
    assert node["interconnect"] == "host_memory"
    assert node["host_ram_bytes"] == 64 * GIB
    assert node["disk_free_bytes"] == 500 * GIB
    assert sorted(node["overridden"]) == ["disk_free_bytes", "host_ram_bytes"]
    assert node["cache_dir"] == str(stack.state_dir / "cache")
    assert inventory["problems"] == []


def test_status_table_shows_the_inventory(stack: RunningStack) -> None:
    result = _cli(stack, "status")
    assert result.returncode == 0, result.stderr
    assert "inventory (* = overridden)" in result.stdout
    assert "cpu-standin" in result.stdout
    assert "64.0 GiB*" in result.stdout
    assert "500.0 GiB*" in result.stdout


def test_add_dry_run_reports_real_size_and_disk_verdict_per_node(stack: RunningStack) -> None:
    before = stack.status()["models"]
    result = _cli(
        stack, "add", "miniature:llama", "--name", "mini-llama-dry", "--dry-run", "--json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["outcome"] == "done"
    weights = outcome["details"]["weights"]
    assert weights["source"] == "miniature:llama"
    assert 0 < weights["weight_bytes"] <= weights["total_bytes"]
    # The data node's cache: the head, which holds no slot, stages nothing.
    (verdict,) = weights["disk"]
    # A generated miniature is not copied into the cache: nothing more is needed.
    assert verdict["need_bytes"] == 0
    assert verdict["free_bytes"] == 500 * GIB
    assert verdict["usable_bytes"] == 499 * GIB  # the manager keeps 1 GiB in reserve
    assert verdict["fits"] is True
    assert stack.status()["models"] == before


def test_add_dry_run_text_names_the_size_and_the_verdict(stack: RunningStack) -> None:
    result = _cli(stack, "add", "miniature:llama", "--name", "mini-llama-dry", "--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "weights of miniature:llama:" in result.stdout
    assert "disk: node " in result.stdout
    assert "fits (499.0 GiB usable = 500.0 GiB free - 1.0 GiB reserve" in result.stdout


def test_status_answers_at_once_from_the_managers_own_samples(stack: RunningStack) -> None:
    # No Prometheus runs for this stack and no --window-s is given: `status` waits for no
    # scrape window; the figures are the manager's own samples of the gateways' counters
    # (one scrape of every metrics agent every 10 s; the rates between the last two).
    def sampled() -> dict[str, object] | None:
        metrics = stack.status()["metrics"]
        assert isinstance(metrics, dict)
        models = metrics["models"]
        assert isinstance(models, list)
        busy = [m for m in models if m["model"] == "mini-llama" and m["generated_tok_s"] > 0]
        return metrics if metrics["source"] == "manager" and busy else None

    with StatusLoad(stack.base_url, "small", workers=2, api_key=API_KEY):
        wait_until(lambda: sampled() is not None, 90, 3, message=lambda: str(stack.status()))
    started = time.monotonic()
    metrics = stack.status()["metrics"]
    seconds = time.monotonic() - started
    assert isinstance(metrics, dict)
    assert metrics["source"] == "manager" and metrics["window_s"] > 0, metrics
    print(f"status --json with the manager's samples: {seconds:.1f} s")


# ---------------------------------------------------------------- the status route


def _route_cli(
    args: list[str], env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SWITCHYARD, "status", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=cwd,
        check=False,
    )


def test_local_status_reads_the_gateway_route_with_the_operator_key(stack: RunningStack) -> None:
    env = {**stack_env(stack.state_dir), ADMIN_KEY_ENV: ADMIN_KEY}
    result = _route_cli(["--json", "--state-dir", str(stack.state_dir)], env)
    assert result.returncode == 0, result.stderr
    through_gateway = json.loads(result.stdout)
    over_ray = stack.status()
    assert through_gateway["read_via"] == "gateway" and over_ray["read_via"] == "ray"

    def standing(document: dict[str, object]) -> list[dict[str, object]]:
        # Without the live figures, which move between two samples.
        models = document["models"]
        assert isinstance(models, list)
        live = ("generated_tok_s", "ttft_p95_s")
        return [{k: v for k, v in m.items() if k not in live} for m in models]

    assert standing(through_gateway) == standing(over_ray)
    assert through_gateway["aliases"] == over_ray["aliases"]
    assert through_gateway["address"] == over_ray["address"]
    inventory = through_gateway["inventory"]
    assert isinstance(inventory, dict) and len(inventory["nodes"]) == 2
    assert through_gateway["manager_status_age_s"] < 30
    assert [e["alive"] for e in through_gateway["endpoints"]] == [True]
    # Without the operator key in its environment, `status` falls back to Ray.
    fallback = _route_cli(
        ["--json", "--state-dir", str(stack.state_dir)], stack_env(stack.state_dir)
    )
    assert fallback.returncode == 0 and json.loads(fallback.stdout)["read_via"] == "ray"


def test_status_url_reads_a_stack_from_a_process_that_cannot_import_ray(
    stack: RunningStack, tmp_path: Path
) -> None:
    # A `ray` package that fails to import, first on the path: `status --url` must never
    # need it (any machine that reaches the endpoint, no Ray node, no state directory).
    blocker = tmp_path / "no_ray" / "ray"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no Ray on this machine')\n")
    env = stack_env(tmp_path / "elsewhere")
    env["PYTHONPATH"] = str(blocker.parent)
    env["COLUMNS"] = "80"
    url = ["--url", stack.base_url, "--admin-key-env", "OPERATOR_KEY"]

    as_json = _route_cli([*url, "--json"], {**env, "OPERATOR_KEY": ADMIN_KEY}, cwd=tmp_path)
    text = _route_cli(url, {**env, "OPERATOR_KEY": ADMIN_KEY}, cwd=tmp_path)
    tenant = _route_cli([*url, "--json"], {**env, "OPERATOR_KEY": API_KEY}, cwd=tmp_path)
    nobody = _route_cli([*url, "--json"], env, cwd=tmp_path)
    closed = _route_cli(["--url", "http://127.0.0.1:9", "--json"], env, cwd=tmp_path)

    assert as_json.returncode == 0, as_json.stderr
    document = json.loads(as_json.stdout)
    assert document["read_via"] == "gateway" and document["head"] is None
    over_ray = stack.status()["models"]
    assert isinstance(over_ray, list)
    assert {m["name"] for m in document["models"]} == {m["name"] for m in over_ray}
    assert text.returncode == 0, text.stderr
    assert "inventory (* = overridden)" in text.stdout
    # A tenant key is no operator key; no key is refused too; nothing listening is exit 3.
    assert tenant.returncode == nobody.returncode == 2
    assert "invalid operator key" in tenant.stderr.lower()
    assert closed.returncode == 3 and "endpoint unreachable" in closed.stderr


def test_export_and_an_unchanged_diff_read_the_fleet_route_as_over_ray(
    stack: RunningStack, tmp_path: Path
) -> None:
    # With the operator key, `export` and a `diff -f` that changes nothing answer from the
    # gateway's fleet route (no Ray driver); without it, over Ray: the same text.
    operator = {**stack_env(stack.state_dir), ADMIN_KEY_ENV: ADMIN_KEY}
    state = ["--state-dir", str(stack.state_dir)]

    def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [SWITCHYARD, *args, *state], capture_output=True, text=True, timeout=120, env=env,
            check=False,
        )  # fmt: skip

    through_gateway = cli("export", env=operator)
    over_ray = cli("export", env=stack_env(stack.state_dir))
    assert through_gateway.returncode == over_ray.returncode == 0, through_gateway.stderr
    assert through_gateway.stdout == over_ray.stdout
    exported = tmp_path / "exported.yaml"
    exported.write_text(through_gateway.stdout)
    unchanged = cli("diff", "-f", str(exported), "--json", env=operator)
    assert unchanged.returncode == 0, unchanged.stderr
    assert json.loads(unchanged.stdout) == json.loads(
        cli("diff", "-f", str(exported), "--json", env=stack_env(stack.state_dir)).stdout
    )
    assert json.loads(unchanged.stdout)["changes"] == []
