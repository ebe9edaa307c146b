"""The fake engine answers like vLLM's OpenAI server: stream shapes, usage, length refusals,
prompt tokens by the model's own tokenizer, and no start on a truncated checkpoint."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from cluster.miniature_generator import corrupt_weights, write_miniature
from serve_apps.engine.fake_engine import (
    FakeEngine,
    FakeEngineError,
    FakeEngineSettings,
    check_checkpoint,
    fake_engine_app,
    token_counter,
)

pytestmark = pytest.mark.unit

QUICK = FakeEngineSettings(start_s=0, token_interval_s=0, max_model_len=64)


def _engine(settings: FakeEngineSettings = QUICK) -> FakeEngine:
    return FakeEngine("mini", settings, lambda text: len(text.split()))


def _events(engine: FakeEngine, kind: str, body: dict[str, Any]) -> list[Any]:
    async def collect() -> list[str]:
        return [event async for event in engine.stream(kind, body)]

    raw = asyncio.run(collect())
    assert raw[-1] == "data: [DONE]\n\n"
    return [json.loads(e.removeprefix("data: ")) for e in raw[:-1]]


def test_a_streamed_completion_is_one_chunk_per_token_then_done() -> None:
    chunks = _events(_engine(), "completions", {"prompt": "a b c", "max_tokens": 3})
    assert [c["choices"][0]["text"] for c in chunks] == [" tok"] * 3
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, "length"]
    assert {c["object"] for c in chunks} == {"text_completion"}
    assert len({c["id"] for c in chunks}) == 1


def test_a_streamed_chat_has_the_role_first_and_usage_when_asked() -> None:
    body = {
        "messages": [{"role": "user", "content": "hi there"}],
        "max_tokens": 2,
        "stream_options": {"include_usage": True},
    }
    *tokens, usage = _events(_engine(), "chat", body)
    assert tokens[0]["choices"][0]["delta"] == {"content": " tok", "role": "assistant"}
    assert tokens[1]["choices"][0]["delta"] == {"content": " tok"}
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": 6, "completion_tokens": 2, "total_tokens": 8}


def test_a_whole_answer_carries_usage() -> None:
    answer = asyncio.run(_engine().complete("completions", {"prompt": "one two"}))
    assert answer["choices"][0]["text"] == " tok" * 16  # vLLM's default max_tokens here
    assert answer["usage"]["prompt_tokens"] == 2 and answer["usage"]["completion_tokens"] == 16


@pytest.mark.parametrize("max_tokens", [0, -1, "3", True])
def test_a_bad_max_tokens_is_refused(max_tokens: object) -> None:
    with pytest.raises(FakeEngineError, match="max_tokens"):
        _engine().plan("completions", {"prompt": "x", "max_tokens": max_tokens})


def test_more_tokens_than_the_context_is_a_400_naming_the_limit() -> None:
    with pytest.raises(FakeEngineError) as refused:
        _engine().plan("completions", {"prompt": "a b", "max_tokens": 63})
    assert refused.value.status == 400
    assert "maximum context length is 64 tokens" in str(refused.value)
    assert refused.value.body()["error"]["code"] == 400


def test_prompt_tokens_are_counted_by_the_miniatures_tokenizer(tmp_path: Path) -> None:
    from tokenizers import Tokenizer

    model_dir = write_miniature("llama", tmp_path / "llama")
    count = token_counter(model_dir)
    reference = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    text = "The switchyard sorts wagons"
    assert count(text) == len(reference.encode(text, add_special_tokens=True).ids)


def test_a_truncated_checkpoint_does_not_start(tmp_path: Path) -> None:
    model_dir = write_miniature("llama", tmp_path / "llama")
    check_checkpoint(model_dir)
    corrupt_weights(model_dir)
    with pytest.raises(RuntimeError, match="SafetensorError"):
        check_checkpoint(model_dir)


def test_a_directory_without_config_does_not_start(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"config\.json"):
        check_checkpoint(tmp_path)


def test_the_http_app_refuses_before_the_stream_starts() -> None:
    app = fake_engine_app(_engine())

    async def ask() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://fake") as client:
            too_long = await client.post(
                "/v1/completions", json={"prompt": "x", "max_tokens": 999, "stream": True}
            )
            streamed = await client.post(
                "/v1/chat/completions",
                json={"messages": [{"role": "user", "content": "hi"}], "stream": True},
            )
            bad = await client.post("/v1/completions", content=b"{not json")
        return too_long, streamed, bad

    too_long, streamed, bad = asyncio.run(ask())
    assert too_long.status_code == 400 and "maximum context length" in too_long.text
    assert streamed.status_code == 200
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert streamed.text.endswith("data: [DONE]\n\n")
    assert bad.status_code == 400
