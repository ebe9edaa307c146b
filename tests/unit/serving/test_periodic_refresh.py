"""The gateway's polled views keep their last value through a failed fetch."""

from __future__ import annotations

import asyncio

import pytest

from serve_apps.periodic_refresh import PeriodicRefresh

pytestmark = pytest.mark.anyio


async def test_a_failed_fetch_keeps_the_last_value_and_its_time() -> None:
    answers: list[int | Exception] = [1, RuntimeError("registry restarting"), 3]

    async def fetch() -> int:
        answer = answers.pop(0) if answers else 3
        if isinstance(answer, Exception):
            raise answer
        return answer

    refresh = PeriodicRefresh(fetch, 0, period_s=0.01, what="test")
    assert (refresh.value, refresh.updated_at) == (0, 0.0)
    refresh.start()
    try:
        for _ in range(100):
            if refresh.value == 3:
                break
            await asyncio.sleep(0.01)
    finally:
        await refresh.stop()
    assert refresh.value == 3
    assert refresh.updated_at > 0
