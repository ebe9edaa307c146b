"""Lifecycle commands never hang, as a new user meets them:

- `switchyard down` finishes in bounded time when the recorded head is half dead (GCS up,
  raylet gone) or already gone, says what it found, and cleans the stale record;
- a foreground `switchyard up` (what `make run` runs) whose cluster is stopped by `down`
  from another terminal notices, says so and exits 0, without Ray's error spew (here the
  head is half dead too: one stack start serves both);
- Ctrl-C while `up` is starting leaves nothing running;
- (riding on the first test's stack) `up --tls-cert --tls-key` serves its endpoint over HTTPS
  only, and says so.

Real Ray, Serve and gateway; the engines are fake ones (`--fake-engines`): the subject is
the lifecycle, not vLLM (`make run` with a real engine is test_make_run.py).
"""

from __future__ import annotations

import json
import signal
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.support.running_stack import SWITCHYARD, RunningStack, stack_env
from tests.support.tls_cert import self_signed
from tests.support.waiting import wait_until

DOWN_BOUND_S = 45.0
"""`down` stops a head's processes with a 15 s grace; anything near a minute is a hang."""


class Foreground:
    """`switchyard up` in the foreground, its output collected line by line."""

    def __init__(self, running: RunningStack, *extra: str) -> None:
        command = [
            SWITCHYARD,
            "up",
            "--fake-engines",
            "--accelerator",
            "cpu",
            "--model",
            "miniature:llama",
            "--port",
            str(running.port),
            "--ray-port",
            str(running.ray_port),
            "--dashboard-port",
            str(running.dashboard_port),
            "--state-dir",
            str(running.state_dir),
            *extra,
        ]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=stack_env(running.state_dir),
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str, timeout_s: float) -> None:
        wait_until(
            lambda: text in self.output or self.process.poll() is not None,
            timeout_s,
            0.2,
            message=lambda: f"never printed {text!r}:\n{self.output[-3000:]}",
        )
        assert text in self.output, self.output[-3000:]

    def wait(self, timeout_s: float) -> int:
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"`up` still runs {timeout_s:g} s later:\n{self.output[-3000:]}"
            ) from None
        self._reader.join(5)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()


@pytest.fixture
def running(tmp_path: Path) -> Iterator[RunningStack]:
    stack = RunningStack.on_free_ports(tmp_path / "state")
    try:
        yield stack
    finally:
        for proc in stack.processes():
            proc.kill()


def _timed_down(running: RunningStack) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    down = running.down()
    return down, time.monotonic() - started


def _named(running: RunningStack, name: str) -> list[psutil.Process]:
    found = []
    for proc in running.processes():
        try:
            if proc.name() == name:
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found


def _check_https_only(running: RunningStack, cert: Path, output: str) -> None:
    url = f"https://127.0.0.1:{running.port}"
    assert f"Switchyard is serving on {url}/v1" in output, output[-2000:]
    context = ssl.create_default_context(cafile=str(cert))
    health = httpx.get(f"{url}/health", verify=context, timeout=30)
    assert health.status_code == 200
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{running.port}/health", timeout=10)


def test_a_half_dead_head_stopped_elsewhere_ends_the_foreground_up_and_down_is_bounded(
    running: RunningStack, tmp_path: Path
) -> None:
    # `make run` in one terminal; its head loses its raylet; `switchyard down` in another.
    cert, key = self_signed(tmp_path)
    up = Foreground(running, "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        up.wait_for("Press Ctrl-C to stop.", 300)
        _check_https_only(running, cert, up.output)
        (raylet,) = _named(running, "raylet")
        raylet.kill()
        raylet.wait(10)
        assert _named(running, "gcs_server"), "the GCS stays up: the head is half dead"

        down, seconds = _timed_down(running)
        assert down.returncode == 0, down.stdout + down.stderr
        assert seconds < DOWN_BOUND_S, f"down took {seconds:.0f} s"
        assert "half dead" in down.stdout and "raylet gone" in down.stdout, down.stdout
        assert not running.processes()
        assert not (running.state_dir / "stack.json").exists()
        assert not (running.state_dir / "local_head.json").exists()

        code = up.wait(30)
    finally:
        up.kill()
    assert code == 0, up.output[-3000:]
    assert "went away" in up.output, up.output[-3000:]
    after = up.output.split("Press Ctrl-C to stop.", 1)[1]
    assert "Traceback" not in after and "GCS" not in after, after[-3000:]
    print(f"down on a half-dead head: {seconds:.1f} s; the foreground up exited 0")


def test_down_on_a_head_that_is_already_gone_cleans_the_record(running: RunningStack) -> None:
    from cluster.startup.ray_runtime import LocalHeadConfig, start_local_head
    from switchyard.stack import StackInfo
    from switchyard.teardown import STACK_FILE

    connection = start_local_head(
        LocalHeadConfig(port=running.ray_port, dashboard_port=running.dashboard_port),
        running.state_dir,
    )
    info = StackInfo(connection.address, f"http://127.0.0.1:{running.port}", None, True)
    (running.state_dir / STACK_FILE).write_text(json.dumps(info.to_json()))
    for proc in running.processes():
        proc.kill()
    wait_until(lambda: not running.processes(), 30, 0.5)

    down, seconds = _timed_down(running)
    assert down.returncode == 0, down.stdout + down.stderr
    assert seconds < DOWN_BOUND_S, f"down took {seconds:.0f} s"
    assert "already gone" in down.stdout, down.stdout
    assert not (running.state_dir / STACK_FILE).exists()
    again = running.down()
    assert "nothing to stop" in again.stdout, again.stdout


def test_ctrl_c_while_up_is_starting_leaves_nothing_running(running: RunningStack) -> None:
    up = Foreground(running)
    try:
        up.wait_for("deploying the gateway", 300)
        up.process.send_signal(signal.SIGINT)
        code = up.wait(90)
    finally:
        up.kill()
    assert code == 130, up.output[-3000:]
    assert "interrupted" in up.output, up.output[-3000:]
    wait_until(lambda: not running.processes(), 30, 0.5, message="Ray processes left behind")
    assert not (running.state_dir / "stack.json").exists()
