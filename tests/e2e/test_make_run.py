"""`make run` on this machine serves `default` within minutes; `switchyard down` cleans up.

Runs the README's main command exactly as a newcomer would (in the background), then talks
to it with the official `openai` client on the documented endpoint.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import openai
import pytest

from tests.support.running_stack import SWITCHYARD, RunningStack, stack_env
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
ENDPOINT = "http://127.0.0.1:8000/v1"


def _port_busy(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _answers(client: openai.OpenAI) -> bool:
    try:
        reply = client.chat.completions.create(
            model="default", messages=[{"role": "user", "content": "Hello"}], max_tokens=4
        )
    except openai.OpenAIError:
        return False
    return reply.model == "mini-kimi-k2.5"


def test_make_run_serves_default_and_down_leaves_no_ray_processes(tmp_path: Path) -> None:
    for port in (8000, 6379, 8265):
        if _port_busy(port):
            pytest.skip(f"port {port} is in use; `make run` needs its documented ports")
    env = stack_env(tmp_path)
    log = (tmp_path / "make-run.log").open("w")
    make = subprocess.Popen(
        ["make", "run"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    stack = RunningStack(state_dir=tmp_path, port=8000, ray_port=6379, dashboard_port=8265)
    client = openai.OpenAI(base_url=ENDPOINT, api_key="unused", max_retries=0, timeout=60)
    started = time.monotonic()
    try:
        wait_until(
            lambda: make.poll() is None and _answers(client),
            900,
            2,
            message=lambda: (tmp_path / "make-run.log").read_text()[-3000:],
        )
        print(f"`make run` served default after {time.monotonic() - started:.0f} s")
        assert stack.processes(), "no Ray processes found for the stack"
    finally:
        down = subprocess.run(
            [SWITCHYARD, "down", "--state-dir", str(tmp_path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert down.returncode == 0, down.stdout + down.stderr
    wait_until(lambda: not stack.processes(), 60, message="Ray processes left behind")
    try:
        make.wait(timeout=120)
    except subprocess.TimeoutExpired:
        make.kill()
        pytest.fail("`make run` kept running after `switchyard down`")
    output = (tmp_path / "make-run.log").read_text()
    assert f"{ENDPOINT}" in output and "curl" in output
