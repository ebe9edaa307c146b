"""A parked model on a real vLLM engine, woken by a request: the capability of models on
demand on the real path (Ray, Serve, the gateway, the registry, the manager, vLLM CPU
engines), where the fake stack proves its rules (tests/e2e/test_fleet_operations.py).

On the suite's real stack (tests/support/shared_stacks.py) before the story's swap: the
Llama miniature serving `small` is parked, a request for `small` is held while its engine
cold-starts, and is answered by it. Afterwards Llama serves `small` again, under its next
app generation.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.support import shared_stacks
from tests.support.running_stack import RunningStack

LLAMA = shared_stacks.LLAMA


@pytest.fixture(scope="module")
def stack(real_stack: RunningStack) -> RunningStack:
    return real_stack


def _model(stack: RunningStack, name: str) -> dict[str, Any]:
    status = json.loads(stack.cli("status", "--json").stdout)
    (model,) = [m for m in status["models"] if m["name"] == name]
    found: dict[str, Any] = model
    return found


def test_a_request_wakes_a_parked_vllm_engine_and_is_answered_by_it(stack: RunningStack) -> None:
    before = _model(stack, LLAMA)["app"]
    parked = stack.cli("park", LLAMA)
    assert parked.returncode == 0, parked.stdout + parked.stderr
    assert _model(stack, LLAMA)["state"] == "parked"

    client = openai.OpenAI(
        base_url=stack.base_url, api_key=shared_stacks.API_KEY, max_retries=0, timeout=600
    )
    reply = client.completions.create(model="small", prompt="Hello", max_tokens=4)

    assert reply.model == LLAMA and reply.choices[0].text is not None
    model = _model(stack, LLAMA)
    generation = int(before.rsplit("-g", 1)[1])
    assert model["state"] == "ready" and model["app"] == f"model-{LLAMA}-g{generation + 1}"
    # The wake was a cold start of a real engine: its duration is recorded, with the
    # engine's logged capacity next to admission's prediction again.
    assert model["last_wake_s"] > 1
    assert (
        model["capacity"]["observed"]["kv_cache_tokens"]
        == (model["capacity"]["predicted"]["kv_cache_tokens"])
    )


def test_park_mode_sleep_is_refused_on_the_cpu_engine_in_one_line(stack: RunningStack) -> None:
    result = stack.cli(
        "add", "miniature:llama", "--name", "sleepy", "--park-mode", "sleep", "--dry-run"
    )
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [ln for ln in result.stdout.splitlines() if "sleep_mode_unavailable" in ln]
    assert lines and all("vLLM's CPU engine" in ln and "park_mode unload" in ln for ln in lines)
    assert "sleepy" not in [
        m["name"] for m in json.loads(stack.cli("status", "--json").stdout)["models"]
    ]
