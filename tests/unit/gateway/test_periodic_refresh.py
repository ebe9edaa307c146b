"""The gateway's polled views keep their last value through a failed fetch."""

from __future__ import annotations

import pytest

from serve_apps.loop_tasks import PeriodicRefresh
from tests.support.waiting import wait_until_async

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
        await wait_until_async(lambda: refresh.value == 3, 1.0, 0.01, message="no third fetch")
    finally:
        await refresh.stop()
    assert refresh.updated_at > 0
