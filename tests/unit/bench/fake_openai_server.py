"""A tiny in-process stand-in for an OpenAI server's streamed /v1/completions, for fast client
tests (the real servers are exercised by tests/integration/test_bench_sweep.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class FakeServer:
    """Streams `max_tokens` one-token chunks, then usage; records what it was sent."""

    delay_s: float = 0.0
    fail_with: int | None = None
    break_after: int | None = None
    bodies: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    model: str | None = None
    """Named in every chunk when set, as a server does (an alias resolves to this name)."""
    held: bool = False
    """While True, new requests wait before their first chunk (a gateway holding an alias
    during a swap); plain attribute, so a test may flip it from another thread."""

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/completions", self._completions, methods=["POST"])])

    async def _completions(self, request: Request) -> Response:
        body = await request.json()
        self.bodies.append(body)
        if self.fail_with is not None:
            error = {"error": {"message": "The model is busy.", "type": "x", "code": None}}
            return JSONResponse(error, status_code=self.fail_with)
        return StreamingResponse(self._events(body), media_type="text/event-stream")

    async def _events(self, body: dict[str, Any]) -> AsyncIterator[str]:
        while self.held:
            await asyncio.sleep(0.005)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            for i in range(body["max_tokens"]):
                if self.break_after is not None and i == self.break_after:
                    error = {"error": {"message": "engine died", "code": 503}}
                    yield f"data: {json.dumps(error)}\n\ndata: [DONE]\n\n"
                    return
                await asyncio.sleep(self.delay_s)
                chunk: dict[str, Any] = {"choices": [{"index": 0, "text": f" w{i}"}], "usage": None}
                if self.model is not None:
                    chunk["model"] = self.model
                yield f"data: {json.dumps(chunk)}\n\n"
            usage = {"prompt_tokens": 16, "completion_tokens": body["max_tokens"]}
            yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"
        finally:
            self.in_flight -= 1
