"""Small pieces the specs' stand-in ASGI servers (fake engines) share."""

from __future__ import annotations

from typing import Any

import pytest


async def request_body(receive: Any) -> bytes:
    """The whole body of an ASGI HTTP request, however many messages it came in."""
    raw = b""
    while True:
        message = await receive()
        raw += bytes(message.get("body", b""))
        if not message.get("more_body"):
            return raw


@pytest.fixture(name="anyio_backend", params=["asyncio", "uvloop"])
def on_both_event_loops(request: pytest.FixtureRequest) -> tuple[str, dict[str, bool]]:
    """A module importing this runs its async specs on both event loops: Ray's workers, the
    gateway's included, run on uvloop, whose transports are not asyncio's classes."""
    return "asyncio", {"use_uvloop": request.param == "uvloop"}
