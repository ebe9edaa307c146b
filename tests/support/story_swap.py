"""The story's swap, once per session, on the real stack: Kimi serves `default` under load,
MiniMax replaces it on the same accelerators through `ray job submit`, while a real
Prometheus (`switchyard metrics prometheus`) scrapes every metrics agent.

Both need one of the head's accelerator slots, so that swap is make-before-break. Then a
forced break-before-make swap of the Llama miniature behind `small` (to `mini-llama-b`, two
replicas), under a lighter load, so the holds are seen too.

tests/e2e/test_hot_swap.py asserts what clients saw and what the jobs printed;
tests/integration/test_observability.py what Prometheus recorded, and
tests/integration/test_replica_affinity_vllm.py uses `mini-llama-b`'s two replicas. After it,
MiniMax serves `default` and `mini-llama-b` serves `small` on the real stack; Kimi is a
tombstone naming MiniMax.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import openai

from tests.support.client_pool import ClientPool, PoolReport
from tests.support.running_stack import SWITCHYARD, RunningStack, free_port, stack_env
from tests.support.shared_stacks import API_KEY, KIMI, LLAMA, MINIMAX
from tests.support.waiting import wait_until

RAY = str(Path(sys.executable).with_name("ray"))
# The shared stacks export metrics every 2 s (shared_stacks.METRICS_REPORT_INTERVAL_MS) and
# Prometheus scrapes every 2 s here: two exports plus a scrape are enough for any series.
EXPORT_WAIT_S = 6
# Every client waits this long between its requests. Back to back, eight clients keep both
# cores on the CPU engine and the swap's own job, NEW's engine start included, runs on what
# is left (a `ray job submit` took a minute to reach the manager); paced, they still keep
# requests in flight through every phase of the swap.
PAUSE_S = 1.0


@dataclass(frozen=True)
class StorySwap:
    stack: RunningStack
    job: subprocess.CompletedProcess[str]
    """`ray job submit -- switchyard swap ...`, as the README shows it."""
    pool: PoolReport
    """Eight paced clients (half streaming) calling `default` from before the swap to after it."""
    answered: tuple[str, ...]
    """The model of every answer of the chat + completion traffic beside the pool."""
    prometheus_url: str
    started_at: float
    """Unix time the load began (the start of every Prometheus range query)."""
    swapped_at: float
    """Unix time the swap job returned (MiniMax serving `default`, Kimi removed)."""
    held_job: subprocess.CompletedProcess[str]
    """`ray job submit -- switchyard swap mini-llama ... --strategy break-before-make`."""
    held_pool: PoolReport
    """Two clients calling `small` through that swap."""
    held_from: float
    """Unix time that swap began (the end of the story swap's range)."""


LLAMA_B = "mini-llama-b"
# NEW of the held swap has two replicas and a longer context: test_replica_affinity_vllm.py
# sends its conversations (about 300 tokens each) to those two replicas, so the suite starts
# two engines here instead of two more of its own.
LLAMA_B_REPLICAS = 2
LLAMA_B_MAX_MODEL_LEN = 1024


def ray_job(
    stack: RunningStack, *args: str, timeout_s: float = 900, working_dir: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`ray job submit [--working-dir DIR] -- switchyard ...` exactly as the README shows
    it."""
    env = stack_env(stack.state_dir)
    env["RAY_AUTH_MODE"] = "token"
    uploaded = ["--working-dir", str(working_dir)] if working_dir is not None else []
    command = [
        RAY,
        "job",
        "submit",
        "--address",
        f"http://127.0.0.1:{stack.dashboard_port}",
        *uploaded,
        "--",
        "switchyard",
        *args,
    ]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
    )


def prometheus_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def _traffic(stack: RunningStack, stop: threading.Event, answered: list[str]) -> None:
    client = openai.OpenAI(base_url=stack.base_url, api_key=API_KEY, max_retries=0, timeout=600)
    while not stop.is_set():
        stream = client.chat.completions.create(
            model="default",
            messages=[{"role": "user", "content": "Count: one two three"}],
            max_tokens=12,
            stream=True,
        )
        model = ""
        for chunk in stream:
            model = chunk.model
        client.completions.create(model="default", prompt="Hello there", max_tokens=6)
        answered.append(model)
        stop.wait(PAUSE_S)


def run_story_swap(stack: RunningStack) -> Iterator[StorySwap]:
    port = free_port()
    prometheus = subprocess.Popen(
        [
            SWITCHYARD,
            "metrics",
            "prometheus",
            "--port",
            str(port),
            "--scrape-interval-s",
            "2",
            "--state-dir",
            str(stack.state_dir),
        ],
        env=stack_env(stack.state_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: prometheus_ready(url), 60, message="Prometheus did not start")
        started_at = time.time()
        stop, answered = threading.Event(), list[str]()
        traffic = threading.Thread(target=_traffic, args=(stack, stop, answered), daemon=True)
        pool = ClientPool(stack.base_url, "default", workers=8, api_key=API_KEY, pause_s=PAUSE_S)
        with pool:
            traffic.start()
            time.sleep(EXPORT_WAIT_S)  # Prometheus sees Kimi serving before the swap
            job = ray_job(stack, "swap", KIMI, "miniature:minimax-m2.5", "--name", MINIMAX)
            swapped_at = time.time()
            time.sleep(EXPORT_WAIT_S)
        stop.set()
        traffic.join(timeout=120)
        time.sleep(EXPORT_WAIT_S)
        held_from = time.time()
        small = ClientPool(stack.base_url, "small", workers=2, api_key=API_KEY, pause_s=PAUSE_S)
        with small:
            time.sleep(EXPORT_WAIT_S / 2)
            held_job = ray_job(
                stack, "swap", LLAMA, "miniature:llama", "--name", LLAMA_B,
                "--strategy", "break-before-make",
                "--replicas", str(LLAMA_B_REPLICAS), "--max-model-len", str(LLAMA_B_MAX_MODEL_LEN),
            )  # fmt: skip
            time.sleep(EXPORT_WAIT_S / 2)
        time.sleep(EXPORT_WAIT_S)
        yield StorySwap(
            stack,
            job,
            pool.report,
            tuple(answered),
            url,
            started_at,
            swapped_at,
            held_job,
            small.report,
            held_from,
        )
    finally:
        prometheus.send_signal(signal.SIGTERM)
        prometheus.wait(timeout=60)
