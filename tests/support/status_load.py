"""Steady load on the endpoint that keeps every request's timing and exact outcome.

Fault tests need more than pass/fail: when a request started and ended relative to the
fault, its HTTP status, `Retry-After`, and for streams whether an error event ended it.
Raw `httpx` is used (not the openai client) so nothing retries or hides a status.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class RequestOutcome:
    started: float
    """time.monotonic() when the request was sent."""
    ended: float
    status: int | None
    """HTTP status; None when no response arrived (connection error or client timeout)."""
    retry_after: str | None
    error: str | None
    """The error message (JSON error body, SSE error event or transport error), if any."""
    model: str | None
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.error is None

    @property
    def seconds(self) -> float:
        return self.ended - self.started


def first_success_after(outcomes: list[RequestOutcome], moment: float) -> float | None:
    """End time of the first successful request sent after `moment`."""
    ends = [o.ended for o in outcomes if o.ok and o.started > moment]
    return min(ends) if ends else None


def describe_failures(outcomes: list[RequestOutcome]) -> str:
    return "; ".join(f"{o.status} {o.error}" for o in outcomes if not o.ok)[:2000]


class StatusLoad:
    """`workers` threads calling `model` back to back until stopped; half of them stream."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        workers: int = 8,
        max_tokens: int = 16,
        timeout_s: float = 120.0,
        api_key: str | None = None,
    ) -> None:
        self._base_url = base_url
        self._model = model
        self._max_tokens = max_tokens
        self._timeout_s = timeout_s
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.outcomes: list[RequestOutcome] = []
        self._threads = [
            threading.Thread(target=self._work, args=(i % 2 == 0,), daemon=True)
            for i in range(workers)
        ]

    def __enter__(self) -> StatusLoad:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> list[RequestOutcome]:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=self._timeout_s + 30)
        return self.snapshot()

    def snapshot(self) -> list[RequestOutcome]:
        with self._lock:
            return list(self.outcomes)

    def _work(self, streaming: bool) -> None:
        with httpx.Client(timeout=self._timeout_s, headers=self._headers) as client:
            while not self._stop.is_set():
                outcome = self._one(client, streaming)
                with self._lock:
                    self.outcomes.append(outcome)
                if not outcome.ok:
                    # Pace retries as a polite client would, without honouring the full
                    # Retry-After: the test wants to see when service comes back.
                    time.sleep(0.5)

    def _one(self, client: httpx.Client, streaming: bool) -> RequestOutcome:
        body = {
            "model": self._model,
            "prompt": "The cluster",
            "max_tokens": self._max_tokens,
            "ignore_eos": True,
            "stream": streaming,
        }
        started = time.monotonic()
        try:
            with client.stream("POST", f"{self._base_url}/completions", json=body) as response:
                text = response.read().decode(errors="replace")
                status, retry = response.status_code, response.headers.get("Retry-After")
        except httpx.TimeoutException as exc:
            return RequestOutcome(started, time.monotonic(), None, None, repr(exc), None, True)
        except httpx.HTTPError as exc:
            return RequestOutcome(started, time.monotonic(), None, None, repr(exc), None)
        ended = time.monotonic()
        error, model = _read_reply(text, streaming and status == 200)
        return RequestOutcome(started, ended, status, retry, error, model)


def _read_reply(text: str, sse: bool) -> tuple[str | None, str | None]:
    """(error message or None, model that answered) from a JSON body or an SSE stream."""
    documents = []
    if sse:
        for line in text.splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                documents.append(line.removeprefix("data: "))
    else:
        documents.append(text)
    model = None
    for document in documents:
        try:
            parsed = json.loads(document)
        except json.JSONDecodeError:
            return f"not JSON: {document[:200]}", model
        if not isinstance(parsed, dict):
            return f"unexpected reply: {document[:200]}", model
        if "error" in parsed:
            error = parsed["error"]
            message = error.get("message") if isinstance(error, dict) else str(error)
            return str(message), model
        model = parsed.get("model", model)
    return None, model
