"""Request ids: the client's `X-Request-Id` (or a generated one) comes back on every answer,
names the request in the gateway's log, and reaches the engine, made unique."""

from __future__ import annotations

import logging
import re

import pytest

from tests.unit.gateway.gateway_harness import CHAT, serving

pytestmark = pytest.mark.anyio


async def test_the_clients_id_comes_back_and_reaches_the_engine_made_unique() -> None:
    async with serving() as h:
        first = await h.chat(CHAT, headers={"X-Request-Id": "trace-42"})
        second = await h.chat(CHAT, headers={"X-Request-Id": "trace-42"})
    assert first.headers["x-request-id"] == second.headers["x-request-id"] == "trace-42"
    one, two = h.backend.request_ids
    assert one.startswith("trace-42-") and two.startswith("trace-42-") and one != two


async def test_without_an_id_one_is_made_and_sent_on() -> None:
    async with serving() as h:
        response = await h.chat(CHAT)
    made = response.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", made)
    assert h.backend.request_ids == [made]


@pytest.mark.parametrize("offered", ["x" * 129, "has space", "line\\nbreak", ""])
async def test_an_unusable_id_is_replaced(offered: str) -> None:
    async with serving() as h:
        response = await h.chat(CHAT, headers={"X-Request-Id": offered})
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"])


async def test_refusals_carry_the_id_and_log_it(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="serve_apps.gateway.app")
    async with serving(api_keys=["k"]) as h:
        unauthorized = await h.chat(CHAT, headers={"X-Request-Id": "r-401"})
        unknown = await h.chat(
            {**CHAT, "model": "nope"},
            headers={"X-Request-Id": "r-404", "Authorization": "Bearer k"},
        )
    assert unauthorized.status_code == 401 and unauthorized.headers["x-request-id"] == "r-401"
    assert unknown.status_code == 404 and unknown.headers["x-request-id"] == "r-404"
    assert "request r-404 (key api-key-1, model -) refused: 404 model_not_found" in caplog.text
