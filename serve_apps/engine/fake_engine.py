"""A stand-in for vLLM's OpenAI server: the same endpoints and stream shapes, no model.

For tests and demos whose subject is the gateway, routing, holds, metrics, status or fleet
operations, not the engine (`switchyard up --fake-engines`). It answers completions and
chat completions with exactly `max_tokens` tokens, streamed as vLLM streams them (one
chunk per token, a usage event when asked, `[DONE]`), counts prompt tokens with the
model's own tokenizer when it has one, refuses what vLLM refuses on length, and fails to
start on a checkpoint whose safetensors files are cut short, as vLLM does. Pure: no Ray.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_MAX_TOKENS = 16
TOKEN_TEXT = " tok"
FAILING_PROMPT = "switchyard-fake-engine: fail this request"
"""A prompt the stand-in answers with vLLM's own 500 (`InternalServerError`), as vLLM does
for a request its tool parser or chat template breaks on: the engine stays healthy."""


class FakeEngineSettings(BaseModel):
    """How the stand-in engine behaves (`switchyard up --fake-engines`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start_s: float = Field(1.0, ge=0, le=600, description="seconds a replica takes to start")
    token_interval_s: float = Field(
        0.01, ge=0, le=10, description="seconds between two streamed tokens"
    )
    max_model_len: int = Field(
        4096, ge=16, description="prompt + max_tokens above this is refused, as vLLM does"
    )
    sleep_s: float = Field(0.2, ge=0, le=600, description="seconds a replica takes to sleep")
    wake_s: float = Field(
        0.5, ge=0, le=600, description="seconds a wake takes (level 1: the weights copied back)"
    )
    reload_s: float = Field(
        1.0, ge=0, le=600, description="seconds a level-2 wake's weight reload adds"
    )


class FakeEngineError(Exception):
    """A request the engine refuses (vLLM's 400s), with the status and message vLLM sends."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": str(self),
                "type": "BadRequestError" if self.status < 500 else "InternalServerError",
                "param": None,
                "code": self.status,
            }
        }


def check_checkpoint(model_dir: Path) -> None:
    """Refuse a model directory vLLM would refuse to load: no config, or safetensors files
    whose tensors end before their header says (a truncated download)."""
    try:
        json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"{model_dir}: no readable config.json ({exc})") from exc
    for path in sorted(model_dir.glob("*.safetensors")):
        with path.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        end = max(
            (t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0
        )
        if path.stat().st_size < 8 + length + end:
            raise RuntimeError(
                f"SafetensorError: Error while deserializing header: incomplete metadata, "
                f"file not fully covered ({path.name})"
            )


def token_counter(model_dir: Path) -> Callable[[str], int]:
    """Tokens in a prompt by the model's own tokenizer, special tokens (a BOS) included, as
    vLLM counts a completion's `usage.prompt_tokens`; else by whitespace."""
    path = model_dir / "tokenizer.json"
    if path.is_file():
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(path))
        return lambda text: len(tokenizer.encode(text, add_special_tokens=True).ids)
    return lambda text: len(text.split())


class FakeEngine:
    """Answers OpenAI requests for one served model name."""

    def __init__(
        self, model: str, settings: FakeEngineSettings, count_tokens: Callable[[str], int]
    ) -> None:
        self.model = model
        self._settings = settings
        self._count = count_tokens

    def prompt_tokens(self, kind: str, body: Mapping[str, Any]) -> int:
        if kind == "chat":
            messages = body.get("messages") or []
            text = "\n".join(
                str(m.get("content") or "") for m in messages if isinstance(m, Mapping)
            )
            return self._count(text) + 4 * len(messages)  # role markers, as a template adds
        prompt = body.get("prompt", "")
        if isinstance(prompt, list):
            prompt = " ".join(str(p) for p in prompt)
        return self._count(str(prompt))

    def plan(self, kind: str, body: Mapping[str, Any]) -> tuple[int, int]:
        """(prompt tokens, tokens to generate); raises FakeEngineError as vLLM would."""
        if FAILING_PROMPT in json.dumps(body.get("messages") or body.get("prompt") or ""):
            raise FakeEngineError(500, "the request broke the engine's tool parser")
        prompt = self.prompt_tokens(kind, body)
        wanted = body.get("max_completion_tokens") or body.get("max_tokens")
        generate = DEFAULT_MAX_TOKENS if wanted is None else wanted
        if not isinstance(generate, int) or isinstance(generate, bool) or generate < 1:
            raise FakeEngineError(400, f"max_tokens must be at least 1, got {generate!r}.")
        limit = self._settings.max_model_len
        if prompt + generate > limit:
            raise FakeEngineError(
                400,
                f"This model's maximum context length is {limit} tokens. However, you "
                f"requested {prompt + generate} tokens ({prompt} in the messages, "
                f"{generate} in the completion).",
            )
        return prompt, generate

    async def stream(self, kind: str, body: Mapping[str, Any]) -> AsyncIterator[str]:
        """SSE events, one per token, then usage (if asked) and `[DONE]`."""
        prompt, generate = self.plan(kind, body)
        request_id, created = _ids(kind)
        chat = kind == "chat"
        obj = "chat.completion.chunk" if chat else "text_completion"
        options = body.get("stream_options")
        with_usage = isinstance(options, Mapping) and bool(options.get("include_usage"))
        for index in range(generate):
            if index and self._settings.token_interval_s:
                await asyncio.sleep(self._settings.token_interval_s)
            last = index == generate - 1
            choice: dict[str, Any] = {"index": 0, "finish_reason": "length" if last else None}
            if chat:
                delta: dict[str, Any] = {"content": TOKEN_TEXT}
                if index == 0:
                    delta["role"] = "assistant"
                choice["delta"] = delta
            else:
                choice["text"] = TOKEN_TEXT
                choice["logprobs"] = None
            chunk = {"id": request_id, "object": obj, "created": created, "model": self.model}
            yield _event({**chunk, "choices": [choice]})
        if with_usage:
            usage = _usage(prompt, generate)
            chunk = {"id": request_id, "object": obj, "created": created, "model": self.model}
            yield _event({**chunk, "choices": [], "usage": usage})
        yield "data: [DONE]\n\n"

    async def complete(self, kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """The whole answer at once (a non-streaming request)."""
        prompt, generate = self.plan(kind, body)
        if self._settings.token_interval_s:
            await asyncio.sleep(self._settings.token_interval_s * (generate - 1))
        request_id, created = _ids(kind)
        text = TOKEN_TEXT * generate
        if kind == "chat":
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "length",
                "logprobs": None,
            }
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "finish_reason": "length", "logprobs": None}
            obj = "text_completion"
        return {
            "id": request_id,
            "object": obj,
            "created": created,
            "model": self.model,
            "choices": [choice],
            "usage": _usage(prompt, generate),
        }


def _ids(kind: str) -> tuple[str, int]:
    prefix = "chatcmpl" if kind == "chat" else "cmpl"
    return f"{prefix}-{uuid.uuid4().hex[:16]}", int(time.time())


def _usage(prompt: int, generated: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": generated,
        "total_tokens": prompt + generated,
    }


def _event(payload: Mapping[str, Any]) -> str:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n"


def fake_engine_app(engine: FakeEngine) -> Any:
    """The engine's HTTP app: what the gateway's direct path calls on a real engine."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    def handler(kind: str) -> Callable[[Request], Any]:
        async def answer(request: Request) -> Response:
            try:
                body = await request.json()
            except ValueError:
                return JSONResponse(FakeEngineError(400, "invalid JSON").body(), status_code=400)
            if not isinstance(body, dict):
                return JSONResponse(FakeEngineError(400, "expected an object").body(), 400)
            try:
                if body.get("stream"):
                    engine.plan(kind, body)  # refuse before the 200 status line
                    return StreamingResponse(
                        engine.stream(kind, body), media_type="text/event-stream"
                    )
                return JSONResponse(await engine.complete(kind, body))
            except FakeEngineError as exc:
                return JSONResponse(exc.body(), status_code=exc.status)

        return answer

    async def health(_: Request) -> Response:
        return Response(status_code=200)

    async def models(_: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": engine.model, "object": "model"}]})

    return Starlette(
        routes=[
            Route("/v1/completions", handler("completions"), methods=["POST"]),
            Route("/v1/chat/completions", handler("chat"), methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ]
    )
