"""The story's moment, end to end, on the real stack: Kimi serves `default`; MiniMax
replaces it on the same accelerators through `ray job submit`, under load, with no failed
request, and the 404 for Kimi names its replacement.

The swap itself runs once per session (tests/support/story_swap.py, shared with
test_observability.py). Admission refusals, rollback, concurrent changes and a manager
killed mid-swap are fleet operations: tests/e2e/test_fleet_operations.py, on fake engines.
A forced break-before-make swap of the Llama miniature behind `small` follows, also through
`ray job submit`: requests wait through it and none fails. After this module MiniMax serves
`default` and `mini-llama-b` (two replicas) serves `small` on the real stack.
"""

from __future__ import annotations

import openai
import pytest

from tests.support.shared_stacks import API_KEY, KIMI, MINIMAX
from tests.support.story_swap import LLAMA_B, StorySwap


def _client(swap: StorySwap) -> openai.OpenAI:
    return openai.OpenAI(base_url=swap.stack.base_url, api_key=API_KEY, max_retries=0, timeout=300)


def test_swap_under_load_through_ray_job_submit_drops_nothing(story_swap: StorySwap) -> None:
    report, log = story_swap.pool, story_swap.job.stdout + story_swap.job.stderr
    assert story_swap.job.returncode == 0, log
    assert "deploying_new" in log and "phases:" in log, log
    assert report.failures == [], report.failures[:5]
    assert report.incomplete == 0
    assert report.ok > 0 and report.answered_by[MINIMAX] > 0
    reply = _client(story_swap).completions.create(model="default", prompt="hi", max_tokens=2)
    assert reply.model == MINIMAX
    # OLD named explicitly is gone, and the 404 names its replacement.
    with pytest.raises(openai.NotFoundError, match=MINIMAX):
        _client(story_swap).completions.create(model=KIMI, prompt="hi", max_tokens=1)
    held = report.slowest_s
    print(f"swap under load: {report.ok} requests, 0 failed, longest held {held:.1f} s")


def test_the_story_swap_says_where_news_start_went(story_swap: StorySwap) -> None:
    # Read from Ray's records and the replica's vLLM log: a real engine reports its weight
    # load and KV cache steps, and runs eager on the CPU (no compile step).
    log = story_swap.job.stdout
    assert "strategy: make-before-break" in log, log
    started = next(line for line in log.splitlines() if " started in " in line)
    for step in ("scheduling", "replica_process", "engine_start", "weight_load", "kv_cache"):
        assert f"{step} " in started and f"{step} absent" not in started, started
    assert "compile absent" in started, started


def test_a_forced_break_before_make_swap_holds_requests_and_loses_none(
    story_swap: StorySwap,
) -> None:
    log = story_swap.held_job.stdout + story_swap.held_job.stderr
    assert story_swap.held_job.returncode == 0, log
    assert "strategy: break-before-make (asked for)" in log, log
    # NEW's weights were read into the page cache before the hold, or the log says why not.
    assert "into the page cache" in log or "weights not prefetched" in log, log
    report = story_swap.held_pool
    assert report.failures == [], report.failures[:5]
    assert report.incomplete == 0
    assert report.answered_by[LLAMA_B] > 0
    # The longest request waited through the hold (the drain, OLD's removal, NEW's start).
    assert report.slowest_s > 1.0, report
