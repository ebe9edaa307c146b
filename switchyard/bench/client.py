"""One streamed `/v1/completions` request, timed chunk by chunk, the way `vllm bench serve`
does it (the completions endpoint, `ignore_eos`, `stream_options.include_usage`)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import httpx

from switchyard.bench.request_record import RequestRecord, failed_record

_DATA = "data:"
_ERROR_CHARS = 300


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    """The OpenAI base URL, ending in /v1."""
    model: str
    api_key: str | None = None

    @property
    def completions_url(self) -> str:
        return self.base_url.rstrip("/") + "/completions"

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers


def completion_payload(model: str, prompt: str, output_len: int) -> dict[str, Any]:
    return {
        "model": model,
        "prompt": prompt,
        "max_tokens": output_len,
        # Exact output lengths: the miniatures' random weights emit EOS at any step.
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def new_http_client(
    max_connections: int, timeout_s: float, transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    """`transport` replaces the network, for unit tests against an in-process app."""
    limits = httpx.Limits(
        max_connections=max_connections, max_keepalive_connections=max_connections
    )
    return httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(timeout_s), transport=transport)


async def stream_completion(
    client: httpx.AsyncClient, endpoint: Endpoint, prompt: str, output_len: int
) -> RequestRecord:
    """Send one request and record it; never raises for server or network errors."""
    payload = completion_payload(endpoint.model, prompt, output_len)
    start = time.perf_counter()
    chunk_times: list[float] = []
    usage: dict[str, Any] = {}
    served: list[str] = []
    try:
        async with client.stream(
            "POST", endpoint.completions_url, json=payload, headers=endpoint.headers()
        ) as response:
            if response.status_code != 200:
                body = (await response.aread()).decode("utf-8", "replace")
                return failed_record(start, f"HTTP {response.status_code}: {_error_text(body)}")
            async for line in response.aiter_lines():
                arrived = time.perf_counter()
                if not line.startswith(_DATA):
                    continue  # blank separators and ": ping" comments
                data = line[len(_DATA) :].strip()
                if data == "[DONE]":
                    break
                event = json.loads(data)
                if "error" in event:
                    return _partial(start, chunk_times, usage, _error_text(data), served)
                if not served and isinstance(event.get("model"), str):
                    served.append(event["model"])
                if event.get("choices"):
                    chunk_times.append(arrived)
                if event.get("usage"):
                    usage = event["usage"]
    except (httpx.HTTPError, ValueError, OSError) as exc:
        error = f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]
        return _partial(start, chunk_times, usage, error, served)
    if not chunk_times:
        return failed_record(start, "the stream ended without a single token")
    return RequestRecord(
        start_s=start,
        chunk_times_s=tuple(chunk_times),
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        served_model=served[0] if served else None,
    )


def _partial(
    start: float, chunk_times: list[float], usage: dict[str, Any], error: str, served: list[str]
) -> RequestRecord:
    return RequestRecord(
        start_s=start,
        chunk_times_s=tuple(chunk_times),
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        error=error,
        served_model=served[0] if served else None,
    )


def _error_text(body: str) -> str:
    """The OpenAI error message when the body is one, else the body; one line, bounded."""
    message = body
    try:
        parsed = json.loads(body)
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
            message = str(parsed["error"].get("message", body))
        elif isinstance(parsed, dict) and "detail" in parsed:
            message = str(parsed["detail"])
    except ValueError:
        pass
    return " ".join(message.split())[:_ERROR_CHARS]
