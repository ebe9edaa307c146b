"""The suite's polling helpers: True once the condition holds, AssertionError with a message
at the deadline."""

from __future__ import annotations

import itertools

import pytest

from tests.support.waiting import wait_until, wait_until_async


def test_a_condition_that_becomes_true_ends_the_wait():
    tries = itertools.count()
    assert wait_until(lambda: next(tries) >= 3, 5, 0.001) is True


def test_a_condition_never_met_raises_with_the_message():
    with pytest.raises(AssertionError, match=r"^still down \(waited 0.05 s\)$"):
        wait_until(lambda: False, 0.05, 0.01, message="still down")


def test_a_callable_message_is_read_at_the_deadline():
    state = ["starting"]

    def never() -> bool:
        state[0] = "stuck"
        return False

    with pytest.raises(AssertionError, match="stuck"):
        wait_until(never, 0.02, 0.01, message=lambda: state[0])


def test_the_condition_is_checked_once_more_at_the_deadline():
    checks: list[int] = []
    with pytest.raises(AssertionError, match="condition not met"):
        wait_until(lambda: checks.append(1), 0.05, 10)
    assert len(checks) == 2, "once at the start, once at the deadline"


@pytest.mark.anyio
async def test_the_async_helper_has_the_same_contract():
    tries = itertools.count()
    assert await wait_until_async(lambda: next(tries) >= 3) is True
    with pytest.raises(AssertionError, match=r"^no reply \(waited 0.01 s\)$"):
        await wait_until_async(lambda: False, 0.01, message="no reply")
