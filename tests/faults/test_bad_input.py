"""Bad input against a real stack (`switchyard up`: Ray, Serve, the gateway, which listens on
the endpoint itself, and one vLLM CPU engine): generated and hand-picked malformed requests,
oversized bodies and slow clients get a 4xx or an answer, never a 5xx, the stack keeps
serving, and the memory of the gateway and the engine replica stays bounded.

On the suite's real stack (tests/support/shared_stacks.py), which it leaves serving as it
found it; the tests run in file order and the memory check comes last.
Every test prints its figures (`FIGURE ...` lines) for RELIABILITY.md.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import shared_stacks
from tests.support.running_stack import RunningStack

API_KEY = shared_stacks.API_KEY
MODEL = "small"
"""The Llama miniature on the real stack (its context: shared_stacks.MAX_MODEL_LEN)."""
MAX_MODEL_LEN = shared_stacks.MAX_MODEL_LEN
GATEWAY_PROCESS = "ServeReplica:switchyard-gateway"
ENGINE_REPLICA_PROCESS = "ServeReplica:model-"
MAX_GROWTH_MIB = 150
"""Bound on RSS growth of the gateway and engine replicas over the whole module (the engine
replica's own HTTP port receives what the gateway forwards)."""
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
COMPLETION = {"model": MODEL, "prompt": "hi", "max_tokens": 2}


@dataclass
class Memory:
    """RSS (MiB) of the gateway and engine replicas, first seen and latest."""

    start: dict[str, float] = field(default_factory=dict)


@pytest.fixture(scope="module")
def stack(real_stack: RunningStack) -> RunningStack:
    return real_stack


def _rss_mib(stack: RunningStack) -> dict[str, float]:
    found: dict[str, float] = {}
    for proc in stack.processes():
        try:
            cmdline = " ".join(proc.cmdline())
            for label, marker in (
                ("gateway", GATEWAY_PROCESS),
                ("engine_replica", ENGINE_REPLICA_PROCESS),
            ):
                if marker in cmdline:
                    found[label] = found.get(label, 0.0) + proc.memory_info().rss / 2**20
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.fixture(scope="module")
def memory(stack: RunningStack) -> Memory:
    # A few ordinary requests first, so lazily built state counts as the baseline.
    for _ in range(3):
        assert _post(stack, "/chat/completions", json.dumps(CHAT).encode()).status_code == 200
    start = _rss_mib(stack)
    assert {"gateway", "engine_replica"} <= start.keys(), start
    print(f"FIGURE bad_input rss_start_mib {json.dumps(start)}")
    return Memory(start=start)


def _post(
    stack: RunningStack,
    path: str,
    body: bytes,
    *,
    timeout_s: float = 120,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    sent = {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"}
    return httpx.post(
        f"{stack.base_url}{path}",
        content=body,
        headers={**sent, **(headers or {})},
        timeout=timeout_s,
    )


def _assert_client_error_or_answer(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert response.json()["error"]["message"]


def _still_serving(stack: RunningStack) -> None:
    response = _post(stack, "/completions", json.dumps(COMPLETION).encode())
    assert response.status_code == 200, response.text


# ---------------------------------------------------------------- generated requests

small_ints = st.integers(min_value=-3, max_value=64) | st.sampled_from([2**31, 2**63, 10**30])
json_scalars = st.none() | st.booleans() | small_ints | st.floats(width=32) | st.text(max_size=12)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
FIELDS = {
    "chat": sorted(
        {
            "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
            "n", "stream", "stop", "logprobs", "top_logprobs", "presence_penalty", "seed",
            "response_format", "tools", "tool_choice", "stream_options", "logit_bias", "user",
        }
    ),
    "completions": sorted(
        {
            "model", "prompt", "max_tokens", "temperature", "top_p", "n", "stream", "stop",
            "logprobs", "echo", "suffix", "best_of", "seed", "logit_bias", "stream_options",
        }
    ),
}  # fmt: skip
"""Fields of OpenAI's request schemas for the two endpoints (what clients actually send)."""

outcomes: dict[int, int] = {}


@st.composite
def mutated_requests(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    method = draw(st.sampled_from(["chat", "completions"]))
    body = dict(CHAT if method == "chat" else COMPLETION)
    for name in draw(st.lists(st.sampled_from(FIELDS[method]), min_size=1, max_size=2)):
        if draw(st.booleans()) and name in body:
            del body[name]
        else:
            body[name] = draw(json_values)
    # Keep each generation short: a fuzzed n or max_tokens must not turn into minutes of CPU.
    for name, cap in (("max_tokens", 8), ("n", 2)):
        value = body.get(name)
        if isinstance(value, int) and cap < value < 2**31:
            body[name] = cap
    return method, body


@settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=mutated_requests())
def test_generated_requests_get_a_4xx_or_an_answer_never_a_5xx(
    stack: RunningStack, memory: Memory, case: tuple[str, dict[str, Any]]
) -> None:
    method, body = case
    path = "/chat/completions" if method == "chat" else "/completions"
    response = _post(stack, path, json.dumps(body).encode())
    outcomes[response.status_code] = outcomes.get(response.status_code, 0) + 1
    _assert_client_error_or_answer(response)


def test_generated_requests_figures(stack: RunningStack) -> None:
    print(f"FIGURE bad_input generated_status_counts {json.dumps(outcomes, sort_keys=True)}")
    _still_serving(stack)


# ---------------------------------------------------------------- hand-picked requests

LONG_PROMPT = "the cluster " * (4 * MAX_MODEL_LEN)
DEEP = b"[" * 100_000 + b"]" * 100_000


def comp(**fields: Any) -> tuple[str, bytes]:
    """A completions request: the valid one with `fields` changed."""
    return "/completions", json.dumps({**COMPLETION, **fields}).encode()


def chat(**fields: Any) -> tuple[str, bytes]:
    return "/chat/completions", json.dumps({**CHAT, **fields}).encode()


def raw(path: str, body: bytes) -> tuple[str, bytes]:
    return path, body


CASES: dict[str, tuple[tuple[str, bytes], int]] = {
    "huge max_tokens": (comp(max_tokens=10**9), 400),
    "max_tokens 2**63": (chat(max_tokens=2**63), 400),
    "max_tokens 10**30": (comp(max_tokens=10**30), 400),
    "negative max_tokens": (comp(max_tokens=-1), 400),
    "prompt over max_model_len": (comp(prompt=LONG_PROMPT), 400),
    "chat over max_model_len": (chat(messages=[{"role": "user", "content": LONG_PROMPT}]), 400),
    "token id out of vocab": (comp(prompt=[10**9]), 400),
    "invalid UTF-8": (raw("/chat/completions", b'{"model": "default", "messages": "\xff"}'), 400),
    "UTF-8 surrogate": (
        raw("/completions", b'{"model": "default", "prompt": "\xed\xa0\x80"}'),
        400,
    ),
    "lone surrogate escape": (
        raw("/completions", b'{"model": "default", "prompt": "\\ud800"}'),
        400,
    ),
    "deep JSON": (
        raw("/chat/completions", b'{"model": "default", "messages": ' + DEEP + b"}"),
        400,
    ),
    "wrong type: messages": (chat(messages=5), 400),
    "wrong type: temperature": (comp(temperature="hot"), 400),
    "wrong type: stream": (comp(stream="maybe"), 400),
    "missing messages": (raw("/chat/completions", b'{"model": "default"}'), 400),
    "missing model": (raw("/completions", b'{"prompt": "x"}'), 400),
    "json_schema without schema": (chat(response_format={"type": "json_schema"}), 400),
    "unknown model": (comp(model="nope"), 404),
    "oversized body": (comp(prompt="a" * (5 * 2**20)), 413),
    "body just under the size limit": (comp(prompt="a" * (4 * 2**20 - 1024)), 400),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_malformed_request_gets_its_4xx(stack: RunningStack, memory: Memory, case: str) -> None:
    (path, body), status = CASES[case]
    response = _post(stack, path, body)
    assert response.status_code == status, response.text
    _assert_client_error_or_answer(response)


def test_an_oversized_chunked_body_gets_413(stack: RunningStack, memory: Memory) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"model": "default", "prompt": "'
        for _ in range(6 * 16):
            yield b"a" * 65536
        yield b'"}'

    response = httpx.post(
        f"{stack.base_url}/completions",
        content=chunks(),
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=120,
    )
    assert response.status_code == 413, response.text
    _still_serving(stack)


# ---------------------------------------------------------------- slow clients


def _raw_request(path: str, body: bytes) -> tuple[bytes, bytes]:
    head = (
        f"POST /v1{path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {API_KEY}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head, body


def test_a_body_trickled_byte_by_byte_is_answered_and_blocks_nobody(stack: RunningStack) -> None:
    head, body = _raw_request("/completions", json.dumps(COMPLETION).encode())
    slow = [socket.create_connection(("127.0.0.1", stack.port), timeout=60) for _ in range(20)]
    try:
        for sock in slow:
            sock.sendall(head)
        started = time.monotonic()
        for i, byte in enumerate(body):
            for sock in slow:
                sock.sendall(bytes([byte]))
            if i % 8 == 0:
                # Others are served while 20 bodies are still arriving.
                _still_serving(stack)
            time.sleep(0.05)
        answers = []
        for sock in slow:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
            answers.append(data.split(b"\r\n", 1)[0])
        print(
            f"FIGURE bad_input trickled_bodies 20 clients x {len(body)} bytes over "
            f"{time.monotonic() - started:.1f} s; status lines {sorted(set(answers))}"
        )
        assert all(line.startswith(b"HTTP/1.1 200") for line in answers), answers
    finally:
        for sock in slow:
            sock.close()


def test_headers_that_never_finish_block_nobody(stack: RunningStack) -> None:
    slow = [socket.create_connection(("127.0.0.1", stack.port), timeout=60) for _ in range(50)]
    try:
        for sock in slow:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        for _ in range(3):
            _still_serving(stack)
    finally:
        for sock in slow:
            sock.close()
    _still_serving(stack)


def test_a_client_that_never_reads_its_stream_is_let_go(stack: RunningStack) -> None:
    body = json.dumps(
        {**COMPLETION, "stream": True, "max_tokens": 200, "ignore_eos": True}
    ).encode()
    head, _ = _raw_request("/completions", body)
    stalled = []
    for _ in range(4):
        sock = socket.create_connection(("127.0.0.1", stack.port), timeout=60)
        # A tiny receive buffer so the server's writes back up quickly.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        sock.sendall(head + body)
        stalled.append(sock)
    try:
        # Long enough for the engine to have generated all 4 x 200 tokens (about 3 s here) and
        # for the unread streams' writes to back up.
        time.sleep(10)
        # The stalled streams neither block other clients nor the engine.
        started = time.monotonic()
        _still_serving(stack)
        print(
            f"FIGURE bad_input request_beside_4_stalled_streams_s {time.monotonic() - started:.2f}"
        )
    finally:
        for sock in stalled:
            sock.close()
    _still_serving(stack)


# ---------------------------------------------------------------- memory (last)


def test_gateway_and_engine_replica_memory_stay_bounded(
    stack: RunningStack, memory: Memory
) -> None:
    # Another round of the heaviest rejected bodies, then measure.
    big = json.dumps({**COMPLETION, "prompt": "a" * (4 * 2**20 - 1024)}).encode()
    deep = b'{"model": "default", "messages": ' + b"[" * 500_000 + b"]" * 500_000 + b"}"
    for _ in range(20):
        assert _post(stack, "/chat/completions", deep).status_code == 400
    for _ in range(2):
        # Under the size limit, so the engine's tokenizer refuses it (over max_model_len).
        _assert_client_error_or_answer(_post(stack, "/completions", big))
    _still_serving(stack)
    end = _rss_mib(stack)
    growth = {name: end[name] - memory.start[name] for name in memory.start}
    print(f"FIGURE bad_input rss_end_mib {json.dumps(end)} growth_mib {json.dumps(growth)}")
    assert all(g < MAX_GROWTH_MIB for g in growth.values()), growth
