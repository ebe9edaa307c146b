"""Which failures are "come back later" and which are the engine's answer, through the
official `openai` client on the fake stack (real Ray, Serve and gateways; fake engine
replicas, which answer a marked prompt with vLLM's own 500, as vLLM does for a request its
tool parser breaks on). The table is in docs/endpoint.md.

- an engine's own 500 reaches the client as 500 `server_error`, once: no `Retry-After`,
  and `x-should-retry: false`, so the client (set to retry twice) sends it once.

The other side, an engine that dies or is restarting answering 503 + `Retry-After`, is
tests/faults/test_serving_faults.py (a vLLM engine killed under load).
"""

from __future__ import annotations

import openai
import pytest

from serve_apps.engine.fake_engine import FAILING_PROMPT
from tests.support import shared_stacks
from tests.support.running_stack import RunningStack

API_KEY = shared_stacks.API_KEY


@pytest.fixture(scope="module")
def stack(fake_stack: RunningStack) -> RunningStack:
    return fake_stack


def test_an_engines_own_500_reaches_the_client_as_500_server_error_and_is_not_retried(
    stack: RunningStack,
) -> None:
    sent: list[object] = []
    http = openai.DefaultHttpxClient(event_hooks={"request": [sent.append]}, timeout=60)
    client = openai.OpenAI(
        base_url=stack.base_url, api_key=API_KEY, max_retries=2, http_client=http
    )
    for stream in (False, True):
        sent.clear()
        with pytest.raises(openai.InternalServerError) as failed:
            answer = client.chat.completions.create(
                model="default",
                messages=[{"role": "user", "content": FAILING_PROMPT}],
                max_tokens=4,
                stream=stream,
            )
            if stream:
                list(answer)
        response = failed.value.response
        assert response.status_code == 500
        assert "retry-after" not in response.headers
        body = failed.value.body
        assert isinstance(body, dict) and body["type"] == "server_error", body
        assert "tool parser" in body["message"]
        assert len(sent) == 1, "the official client must not retry a deterministic 500"
    # The engine is healthy: the next request is answered.
    answer = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "hi"}], max_tokens=4
    )
    assert answer.choices[0].message.content
