"""A stream's timings as the gateway records them: TTFT, and one inter-token gap per token
event, also when several token events leave in one write (a stream read late). No Ray."""

from __future__ import annotations

import pytest

from serve_apps.gateway.request_timing import RequestTiming
from serve_apps.relay.sse_encoding import token_events

TOKEN = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"t"}}]}\n\n'


def test_each_token_event_of_a_write_counts_one_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    timing = RequestTiming()
    clock = iter([1.5, 2.0])
    monkeypatch.setattr("serve_apps.gateway.request_timing.time.monotonic", lambda: next(clock))
    timing.chunk(2)  # the first token and one right behind it
    timing.chunk(3)  # two ticks late: three tokens in one read
    assert timing.first_chunk_at == 1.5
    assert timing.gaps == [0.0, 0.5, 0.0, 0.0]  # five tokens, four gaps, as vLLM counts them


def test_token_events_are_counted_in_every_form_the_engines_send() -> None:
    spaced = b'data: {"choices": [{"index": 0, "delta": {"content": "t"}}]}\n\n'
    responses = (
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta"}\n\n'
    )
    assert token_events(TOKEN) == 1
    assert token_events(TOKEN * 3) == 3
    assert token_events(spaced * 2) == 2
    assert token_events(responses) == 1
    usage_only = b'data: {"choices":[],"usage":{"prompt_tokens":1}}\n\n'
    assert token_events(usage_only + b"data: [DONE]\n\n") == 0
    assert token_events(TOKEN + usage_only + b"data: [DONE]\n\n") == 1
