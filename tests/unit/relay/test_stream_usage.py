"""The engine's usage report in a server-sent-event stream: read, and hidden from a client
that did not ask for it; a malformed `stream_options` is left for validation to refuse."""

from __future__ import annotations

import json
from typing import Any

from serve_apps.relay.stream_usage import Usage, request_usage, scan_events


def event(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n"


USAGE_ONLY = event({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 9}})
TOKEN = event({"choices": [{"delta": {"content": "x"}}]})


def test_a_streaming_request_is_asked_for_usage_keeping_its_other_options() -> None:
    body: dict[str, Any] = {"stream": True, "stream_options": {"continuous_usage_stats": False}}
    assert request_usage(body) is False
    assert body["stream_options"] == {"continuous_usage_stats": False, "include_usage": True}


def test_a_client_that_asked_for_usage_is_left_alone() -> None:
    body: dict[str, Any] = {"stream_options": {"include_usage": True}}
    assert request_usage(body) is True
    assert body == {"stream_options": {"include_usage": True}}


def test_a_malformed_stream_options_is_not_repaired() -> None:
    body: dict[str, Any] = {"stream_options": "yes please"}
    assert request_usage(body) is True
    assert body == {"stream_options": "yes please"}


def test_the_usage_only_event_is_read_and_dropped_when_the_client_did_not_ask() -> None:
    usage = Usage()
    text = scan_events(TOKEN + USAGE_ONLY + "data: [DONE]\n\n", usage, strip_usage=True)
    assert text == TOKEN + "data: [DONE]\n\n"
    assert (usage.prompt_tokens, usage.generated_tokens) == (4, 9)


def test_the_usage_event_is_kept_when_the_client_asked() -> None:
    usage = Usage()
    assert scan_events(USAGE_ONLY, usage, strip_usage=False) == USAGE_ONLY
    assert usage.generated_tokens == 9


def test_events_without_usage_pass_through_untouched() -> None:
    usage = Usage()
    assert scan_events(TOKEN, usage, strip_usage=True) == TOKEN
    assert usage == Usage()
