"""A pool of real `openai` clients calling one model or alias until told to stop.

Used to prove a swap drops nothing: every request's outcome and the model that answered
are recorded. With `pause_s` each client waits that long between its requests (paced load);
without, it sends the next as soon as the last one ends.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import openai


@dataclass
class PoolReport:
    ok: int = 0
    failures: list[str] = field(default_factory=list)
    incomplete: int = 0
    answered_by: Counter[str] = field(default_factory=Counter)
    slowest_s: float = 0.0


class ClientPool:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        workers: int = 8,
        api_key: str = "x",
        max_tokens: int = 8,
        pause_s: float = 0.0,
    ) -> None:
        self._base_url = base_url
        self._model = model
        self._workers = workers
        self._api_key = api_key
        self._max_tokens = max_tokens
        self._pause_s = pause_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.report = PoolReport()
        self._threads = [
            threading.Thread(target=self._work, args=(i,), daemon=True) for i in range(workers)
        ]

    def __enter__(self) -> ClientPool:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> PoolReport:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=900)
        return self.report

    def _work(self, index: int) -> None:
        # Generous timeout: a request held during a swap waits for NEW's cold start.
        client = openai.OpenAI(
            base_url=self._base_url, api_key=self._api_key, max_retries=0, timeout=900
        )
        streaming = index % 2 == 0
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                model, complete = self._stream(client) if streaming else self._plain(client)
            except Exception as exc:
                with self._lock:
                    self.report.failures.append(f"{type(exc).__name__}: {exc}")
                time.sleep(0.5)
                continue
            with self._lock:
                self.report.ok += 1
                self.report.answered_by[model] += 1
                self.report.slowest_s = max(self.report.slowest_s, time.monotonic() - started)
                if not complete:
                    self.report.incomplete += 1
            # A paced client leaves CPU to the control plane and to NEW's engine start:
            # on 2 cores, back-to-back requests to a CPU engine slow a `ray job submit` of
            # `switchyard status` from 3 s to about a minute.
            self._stop.wait(self._pause_s)

    def _plain(self, client: openai.OpenAI) -> tuple[str, bool]:
        reply = client.chat.completions.create(
            model=self._model,
            messages=[{"role": "user", "content": "Hi"}],
            max_tokens=self._max_tokens,
            extra_body={"ignore_eos": True},
        )
        usage = reply.usage
        complete = usage is not None and usage.completion_tokens == self._max_tokens
        return reply.model, complete and reply.choices[0].finish_reason == "length"

    def _stream(self, client: openai.OpenAI) -> tuple[str, bool]:
        stream = client.chat.completions.create(
            model=self._model,
            messages=[{"role": "user", "content": "Hi"}],
            max_tokens=self._max_tokens,
            stream=True,
            extra_body={"ignore_eos": True},
        )
        model, finish = "", None
        for chunk in stream:
            model = chunk.model or model
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
        return model, finish == "length"
