"""The serving plane on the real stack: Ray + Serve + vLLM CPU engines on two miniatures,
driven through `switchyard up/status/down` and called with the official `openai` client.

It runs on the suite's real stack (tests/support/shared_stacks.py: Kimi serving `default`,
Llama `small`) and only reads it. A killed engine under load is
tests/faults/test_serving_faults.py.
"""

from __future__ import annotations

import json

import httpx
import openai
import psutil
import pytest

from tests.support import shared_stacks
from tests.support.running_stack import RunningStack

KIMI, LLAMA = shared_stacks.KIMI, shared_stacks.LLAMA
API_KEY = shared_stacks.API_KEY


@pytest.fixture(scope="module")
def stack(real_stack: RunningStack) -> RunningStack:
    return real_stack


@pytest.fixture(scope="module")
def client(stack: RunningStack) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.base_url, api_key=API_KEY, max_retries=0, timeout=120)


def _post(stack: RunningStack, path: str, body: bytes, key: str | None = API_KEY) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(f"{stack.base_url}{path}", content=body, headers=headers, timeout=120)


def test_up_prints_the_endpoint_and_an_example_request(stack: RunningStack) -> None:
    output = stack.log[0]
    assert f"http://127.0.0.1:{stack.port}/v1" in output
    assert "curl" in output


def test_models_lists_both_models_with_their_aliases(client: openai.OpenAI) -> None:
    models = {m.id: m for m in client.models.list().data}
    assert {KIMI, LLAMA, "default", "small"} <= set(models)
    kimi_extra, llama_extra = models[KIMI].model_extra, models[LLAMA].model_extra
    assert kimi_extra is not None and llama_extra is not None
    assert kimi_extra["aliases"] == ["default"]
    assert llama_extra["aliases"] == ["small"]


def test_chat_completion_through_the_default_alias_reaches_kimi(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Hello"}], max_tokens=8
    )
    assert reply.model == KIMI
    assert reply.usage is not None and reply.usage.completion_tokens > 0
    message = reply.choices[0].message
    # Kimi's recipe sets its reasoning parser; random weights never close their thinking,
    # so the text comes as `reasoning` (tests/integration/test_fleet_file_engines.py).
    assert message.content or (message.model_extra or {}).get("reasoning")


def test_two_models_are_routed_by_name(client: openai.OpenAI) -> None:
    for name in (KIMI, LLAMA):
        reply = client.completions.create(model=name, prompt="The cluster", max_tokens=4)
        assert reply.model == name
        assert reply.choices[0].text is not None


def test_streaming_chat_yields_chunks_then_finishes(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="small",
        messages=[{"role": "user", "content": "Count"}],
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    # vLLM merges the deltas a slow reader has not taken yet into one chunk (its output
    # collector), so a busy machine may see fewer chunks than tokens: count the tokens.
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens == 12
    assert len([c for c in chunks if c.choices]) >= 2
    assert [c for c in chunks if c.choices][-1].choices[0].finish_reason == "length"
    assert isinstance(text, str)


def test_streaming_completion_yields_every_token(client: openai.OpenAI) -> None:
    stream = client.completions.create(
        model=KIMI, prompt="Once", max_tokens=6, stream=True, extra_body={"ignore_eos": True}
    )
    pieces = [c.choices[0].text for c in stream if c.choices]
    assert len(pieces) >= 6


def test_unknown_model_is_404_in_openai_shape(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.completions.create(model="no-such-model", prompt="x", max_tokens=1)
    assert "no-such-model" in str(caught.value)


def test_missing_or_wrong_api_key_is_401(stack: RunningStack) -> None:
    body = json.dumps({"model": "default", "prompt": "x", "max_tokens": 1}).encode()
    assert _post(stack, "/completions", body, key=None).status_code == 401
    assert _post(stack, "/completions", body, key="wrong").status_code == 401
    wrong = openai.OpenAI(base_url=stack.base_url, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()


def test_health_stays_open_without_a_key(stack: RunningStack) -> None:
    response = httpx.get(f"http://127.0.0.1:{stack.port}/health", timeout=30)
    assert response.status_code == 200
    assert response.json()["models_ready"] == 2


def test_bad_bodies_are_400_with_an_openai_error(stack: RunningStack) -> None:
    for body in (
        b"not json",
        b"[1, 2]",
        b'{"prompt": "no model"}',
        b'{"model": "default", "messages": "not a list"}',
    ):
        response = _post(stack, "/chat/completions", body)
        assert response.status_code == 400, body
        assert response.json()["error"]["message"]


def test_too_many_tokens_is_a_400_from_the_engine(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="default", prompt="x", max_tokens=10_000_000)
    assert "max_model_len" in str(caught.value)


def test_oversized_body_is_413(stack: RunningStack) -> None:
    body = json.dumps({"model": "default", "prompt": "a" * (5 * 1024 * 1024)}).encode()
    response = _post(stack, "/completions", body)
    assert response.status_code == 413


def test_status_reports_models_aliases_layout_and_metrics(stack: RunningStack) -> None:
    status = stack.status()
    models = {m["name"]: m for m in status["models"]}  # type: ignore[attr-defined]
    assert models[KIMI]["state"] == "ready"
    assert models[KIMI]["aliases"] == ["default"]
    assert models[KIMI]["layout"] == "TP1xPP1xDP1"
    assert models[LLAMA]["source"] == "miniature:llama"
    assert status["endpoint"] == f"http://127.0.0.1:{stack.port}"
    assert "prometheus_service_discovery_file" in status["metrics"]  # type: ignore[operator]
    assert API_KEY not in json.dumps(status)


def test_requests_reach_the_engines_over_their_direct_http_ports(
    stack: RunningStack, client: openai.OpenAI
) -> None:
    # Each engine replica serves vLLM's app on its own port and registers it; the gateway
    # streams from there instead of through a Serve handle (serve_apps/relay/direct_backend.py).
    def paths() -> dict[str, int]:
        health = httpx.get(f"http://127.0.0.1:{stack.port}/health", timeout=30).json()
        counts: dict[str, int] = health["requests_by_path"]
        return counts

    before = paths()
    client.completions.create(model=KIMI, prompt="Direct", max_tokens=2)
    stream = client.chat.completions.create(
        model=LLAMA, messages=[{"role": "user", "content": "Hi"}], max_tokens=3, stream=True
    )
    assert [c for c in stream if c.choices]
    after = paths()
    assert after["direct"] == before.get("direct", 0) + 2, (before, after)
    assert after.get("handle", 0) == before.get("handle", 0), (before, after)


def test_engines_and_the_gateway_run_at_the_priority_of_rays_daemons(stack: RunningStack) -> None:
    # Ray starts workers at nice 15; at that priority every Ray daemon took the CPU from a
    # CPU-bound engine first (cluster/startup/serve_tuning.py, BENCHMARKS.md).
    niceness: dict[str, set[int]] = {}
    for proc in stack.processes():
        try:
            title = (proc.cmdline() or [proc.name()])[0]
            role = next(
                (r for r in ("raylet", "VLLM::EngineCore", "ServeReplica:") if r in title), None
            )
            if role is not None:
                niceness.setdefault(role, set()).add(proc.nice())
        except psutil.Error:
            continue  # a process that ended meanwhile
    assert niceness.keys() == {"raylet", "VLLM::EngineCore", "ServeReplica:"}, niceness
    assert niceness["VLLM::EngineCore"] == niceness["ServeReplica:"] == niceness["raylet"], niceness
