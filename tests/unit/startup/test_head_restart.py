"""Starting a lost head again (cluster/startup/head_supervisor.py), on stand-in commands:
an attempt fails as soon as the raylet it started dies, and everything it started is
known, so the supervisor can stop it before the next attempt (left running, it held the
head's ports and every later attempt failed on them)."""

from __future__ import annotations

import contextlib
import shutil
import time
from pathlib import Path

import psutil
import pytest

from cluster.startup.head_supervisor import HeadStartAttempt
from cluster.startup.ray_runtime import is_head_process


@pytest.fixture
def raylet(tmp_path: Path) -> Path:
    """An executable whose process is named `raylet` (a copy of sleep)."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    path = tmp_path / "raylet"
    shutil.copy(sleep, path)
    return path


def test_an_attempt_whose_raylet_dies_fails_at_once_and_names_what_it_started(
    tmp_path: Path, raylet: Path
) -> None:
    # `ray start` goes on for minutes after its raylet aborted; the attempt does not.
    command = ["bash", "-c", f"{raylet} 1.5 & sleep 60 & wait"]
    attempt = HeadStartAttempt(command, tmp_path / "start.log")
    started = time.monotonic()
    failure = attempt.wait(timeout_s=30)
    assert failure is not None and "raylet" in failure
    assert time.monotonic() - started < 10
    survivors = [p for p in attempt.children if _alive(p)]
    assert survivors  # what it started outlives it: the supervisor stops it
    for proc in survivors:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(survivors, timeout=5)


def _alive(proc: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    return False


def test_an_attempt_that_exits_0_succeeds_and_one_that_fails_says_how(tmp_path: Path) -> None:
    group = Path("/proc/self/autogroup")
    before = group.read_text() if group.exists() else None
    assert HeadStartAttempt(["true"], tmp_path / "ok.log").wait(timeout_s=10) is None
    # The head's priority is raised for its own session only, never for the caller's.
    assert (group.read_text() if group.exists() else None) == before
    failed = HeadStartAttempt(
        ["bash", "-c", "echo 'ValueError: Failed to bind to 127.0.0.1:8265'; exit 1"],
        tmp_path / "failed.log",
    ).wait(timeout_s=10)
    assert failed is not None and "exit 1" in failed and "Failed to bind" in failed


def test_an_attempt_past_its_time_is_stopped(tmp_path: Path) -> None:
    attempt = HeadStartAttempt(["sleep", "60"], tmp_path / "slow.log")
    failure = attempt.wait(timeout_s=1)
    assert failure is not None and "did not finish in 1 s" in failure


def test_the_client_server_of_the_heads_gcs_is_the_heads_though_it_names_no_session() -> None:
    session = "/tmp/ray/session_2026-12-08_00-00-00_000000_1"
    client_server = [
        "python",
        "-m",
        "ray.util.client.server",
        "--address=192.0.2.2:43937",
        "--port=10001",
    ]
    assert is_head_process(client_server, session, "43937")
    assert not is_head_process(client_server, session, "6379"), "another cluster's"
    assert is_head_process(["raylet", f"--session_dir={session}"], session, "43937")
    assert not is_head_process(["python", "-m", "http.server"], session, "43937")
