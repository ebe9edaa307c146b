"""The story's moment, end to end: Kimi serves `default`; MiniMax replaces it on the same
accelerators through `ray job submit`, under load, with no failed request; a NEW that cannot
load is rolled back by itself; admission refusals change nothing; changes never interleave;
a manager killed mid-swap converges to one consistent state.

One stack (started with `switchyard up`) is shared; tests run in file order.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.support.client_pool import ClientPool
from tests.support.running_stack import (
    SWITCHYARD,
    RunningStack,
    stack_env,
)
from tests.support.waiting import wait_until

KIMI = "mini-kimi-k2.5"
MINIMAX = "mini-minimax-m2.5"
RAY = str(Path(sys.executable).with_name("ray"))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = RunningStack.on_free_ports(tmp_path_factory.mktemp("swap-stack"))
    result = running.up()
    try:
        assert result.returncode == 0, result.stdout + result.stderr
        yield running
    finally:
        running.down()
        wait_until(lambda: not running.processes(), 60, message="Ray processes left behind")


def _client(stack: RunningStack) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.base_url, api_key="x", max_retries=0, timeout=300)


def _default_model(stack: RunningStack) -> str:
    reply = _client(stack).completions.create(model="default", prompt="hi", max_tokens=2)
    return reply.model


def _job(
    stack: RunningStack, *args: str, timeout_s: float = 900
) -> subprocess.CompletedProcess[str]:
    """`ray job submit -- switchyard ...` exactly as the README shows it."""
    env = stack_env(stack.state_dir)
    env["RAY_AUTH_MODE"] = "token"
    command = [
        RAY,
        "job",
        "submit",
        "--address",
        f"http://127.0.0.1:{stack.dashboard_port}",
        "--",
        "switchyard",
        *args,
    ]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
    )


def _cli(
    stack: RunningStack, *args: str, timeout_s: float = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SWITCHYARD, *args, "--state-dir", str(stack.state_dir)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=stack_env(stack.state_dir),
        check=False,
    )


def _journal(stack: RunningStack) -> list[dict[str, object]]:
    path = stack.state_dir / "manager" / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_swap_that_admission_rejects_changes_nothing_and_never_drains(
    stack: RunningStack,
) -> None:
    before = len(_journal(stack))
    result = _cli(stack, "swap", KIMI, "miniature:minimax-m2.5", "--name", "too-wide", "--tp", "5")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "not admitted" in result.stdout
    new_entries = _journal(stack)[before:]
    phases = [e.get("phase") for e in new_entries if e.get("event") == "phase"]
    assert phases == ["preflight"]
    assert _default_model(stack) == KIMI


def test_swap_under_load_through_ray_job_submit_drops_nothing(stack: RunningStack) -> None:
    pool = ClientPool(stack.base_url, "default", workers=8)
    with pool:
        time.sleep(5)
        job = _job(stack, "swap", KIMI, "miniature:minimax-m2.5", "--name", MINIMAX)
        time.sleep(3)
    report = pool.report
    log = job.stdout + job.stderr
    assert job.returncode == 0, log
    assert "deploying_new" in log and "phases:" in log, log
    assert report.failures == [], report.failures[:5]
    assert report.incomplete == 0
    assert report.ok > 0 and report.answered_by[MINIMAX] > 0
    assert _default_model(stack) == MINIMAX
    # OLD named explicitly is gone, and the 404 names its replacement.
    with pytest.raises(openai.NotFoundError, match=MINIMAX):
        _client(stack).completions.create(model=KIMI, prompt="hi", max_tokens=1)
    held = report.slowest_s
    print(f"swap under load: {report.ok} requests, 0 failed, longest held {held:.1f} s")


def test_a_new_model_that_cannot_load_is_rolled_back(stack: RunningStack, tmp_path: Path) -> None:
    broken = tmp_path / "broken-llama"
    made = subprocess.run(
        [SWITCHYARD, "miniature", "llama", str(broken), "--corrupt"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    pool = ClientPool(stack.base_url, "default", workers=4)
    with pool:
        time.sleep(3)
        job = _job(stack, "swap", MINIMAX, str(broken), "--name", "broken-llama")
        time.sleep(3)
    log = job.stdout + job.stderr
    assert job.returncode != 0, log
    assert "rolled back" in log, log
    assert "safetensor" in log.lower() or "SafetensorError" in log, log
    assert pool.report.failures == [], pool.report.failures[:5]
    assert _default_model(stack) == MINIMAX


def test_two_concurrent_changes_never_interleave(stack: RunningStack) -> None:
    env = stack_env(stack.state_dir)
    first = subprocess.Popen(
        [
            SWITCHYARD,
            "add",
            "miniature:llama",
            "--name",
            "mini-llama",
            "--state-dir",
            str(stack.state_dir),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(
            lambda: '"name": "mini-llama"' in _journal_text(stack),
            120,
            0.5,
            message="the journal never named mini-llama",
        )
        second = _cli(stack, "add", "miniature:llama", "--name", "mini-llama-2", "--dry-run")
    finally:
        out, _ = first.communicate(timeout=900)
    assert first.returncode == 0, out
    # Either refused with a message naming the running change, or run after it: never both
    # at once (the journal's start/end times of the two operations do not overlap).
    if second.returncode != 0:
        assert "another change is running" in second.stdout, second.stdout + second.stderr
    spans: dict[str, list[float]] = {}
    for entry in _journal(stack):
        op_id = str(entry.get("op_id"))
        if entry.get("event") == "start" and "mini-llama" in json.dumps(entry.get("details")):
            spans[op_id] = [float(str(entry["at"]))]
        elif entry.get("event") == "end" and op_id in spans:
            spans[op_id].append(float(str(entry["at"])))
    intervals = sorted(spans.values())
    assert len(intervals) >= 1
    for earlier, later in itertools.pairwise(intervals):
        assert later[0] >= earlier[-1], f"operations overlapped: {intervals}"
    removed = _cli(stack, "remove", "mini-llama")
    assert removed.returncode == 0, removed.stdout + removed.stderr


def _journal_text(stack: RunningStack) -> str:
    path = stack.state_dir / "manager" / "journal.jsonl"
    return path.read_text() if path.exists() else ""


_KILL_MANAGER = """
import os, sys, time, json
from cluster.ray_runtime import connect
connect(sys.argv[1])
import ray
from cluster.manager_actor import manager_actor
ray.kill(manager_actor(), no_restart=False)
print("killed")
"""


def test_killing_the_manager_mid_swap_converges_to_one_consistent_state(
    stack: RunningStack,
) -> None:
    env = stack_env(stack.state_dir)
    before = len(_journal(stack))
    swap = subprocess.Popen(
        [
            SWITCHYARD,
            "swap",
            MINIMAX,
            "miniature:kimi-k2.5",
            "--name",
            KIMI,
            "--state-dir",
            str(stack.state_dir),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def deploying_new() -> bool:
        return any(e.get("phase") == "deploying_new" for e in _journal(stack)[before:])

    wait_until(deploying_new, 300, 0.5, message=lambda: _journal_text(stack)[-2000:])
    address = json.loads((stack.state_dir / "stack.json").read_text())["address"]
    killed = subprocess.run(
        [sys.executable, "-c", _KILL_MANAGER, address],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert "killed" in killed.stdout, killed.stdout + killed.stderr
    swap.communicate(timeout=600)
    assert swap.returncode != 0

    def converged() -> bool:
        ends = [e for e in _journal(stack) if e.get("after_restart")]
        return bool(ends)

    wait_until(converged, 600, 2, message=lambda: _journal_text(stack)[-2000:])
    end = [e for e in _journal(stack) if e.get("after_restart")][-1]
    status = stack.status()
    models = {m["name"]: m for m in status["models"]}  # type: ignore[attr-defined]
    serving = status["aliases"]["default"]  # type: ignore[index]
    assert serving in (KIMI, MINIMAX), status
    assert models[serving]["state"] == "ready"
    assert assert_one_owner(models)
    wait_until(
        lambda: _default_answers(stack, serving),
        300,
        3,
        message=f"`default` never answered from {serving}",
    )
    print(f"manager killed in deploying_new -> {end['outcome']}: {end['message']}")


def assert_one_owner(models: dict[str, dict[str, object]]) -> bool:
    """No two models both claim to be serving: only one of the pair is ready."""
    return sum(1 for name in (KIMI, MINIMAX) if models.get(name, {}).get("state") == "ready") == 1


def _default_answers(stack: RunningStack, expected: str) -> bool:
    try:
        return _default_model(stack) == expected
    except openai.OpenAIError:
        return False
