"""Cache-aware replica choice on real vLLM engines: requests that share a `prompt_cache_key`
go to the same replica, so vLLM's own prefix-cache hit counter rises; without the key the
least-loaded choice scatters a conversation's turns over the replicas and they miss.

Runs on the suite's real stack (tests/support/shared_stacks.py) after the story's swap, on
the two replicas of the Llama miniature that swap left behind `small` (`mini-llama-b`,
tests/support/story_swap.py; GQA: vLLM's CPU build keeps prefix caching on for it, not for
MLA). It changes nothing on the stack.

How the two phases are made comparable: each round sends every conversation's next turn,
one request every `STAGGER_S`, all overlapping, so the arrival order decides the
least-loaded choice (first to the first replica, second to the other, ...). The order
rotates by one between the two rounds, so without a key every conversation changes replica
and its second turn misses; with a key it keeps its replica (4 keys never exceed the load
bound) and hits. Only two rounds: after the second, both replicas hold every prompt, and a
third round would hit with or without the key.

The phases start once the gateway's direct path knows both replicas (`/health`'s
`direct_endpoints`). Before that, requests go to the one endpoint it knows or through the
Serve handle, whose router picks by its own rule, and the control's turns land anywhere.
"""

from __future__ import annotations

import random
import threading
import time

import httpx
import pytest

from tests.support import shared_stacks
from tests.support.running_stack import RunningStack
from tests.support.story_swap import LLAMA_B, LLAMA_B_REPLICAS, StorySwap
from tests.support.waiting import wait_until

PAIR = LLAMA_B
CONVERSATIONS = 4
ROUNDS = 2
STAGGER_S = 0.03
MAX_TOKENS = 48
HITS = "ray_vllm_prefix_cache_hits_total"
QUERIES = "ray_vllm_prefix_cache_queries_total"
AUTH = {"Authorization": f"Bearer {shared_stacks.API_KEY}"}
WORDS = [
    *("river", "stone", "garden", "window", "paper", "orange", "silver", "market"),
    *("winter", "candle", "forest", "bridge", "yellow", "letter", "island", "music"),
    *("doctor", "mountain", "summer", "pocket"),
]


@pytest.fixture(scope="module")
def pair(story_swap: StorySwap) -> RunningStack:
    stack = story_swap.stack
    assert story_swap.held_job.returncode == 0, story_swap.held_job.stdout
    wait_until(lambda: _direct_endpoints(stack) == LLAMA_B_REPLICAS, 60, 0.5)
    return stack


def _direct_endpoints(stack: RunningStack) -> int:
    health = httpx.get(f"http://127.0.0.1:{stack.port}/health", timeout=30).json()
    known: dict[str, int] = health["direct_endpoints"]
    return known.get(PAIR, 0)


def _series(stack: RunningStack, name: str) -> float:
    total = 0.0
    for line in stack.metrics_text().splitlines():
        if line.startswith(name + "{") and f'model_name="{PAIR}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def _settled(stack: RunningStack) -> tuple[float, float]:
    """Hits and queries once two exports in a row agree (Ray exports every 2 s here)."""
    seen: list[tuple[float, float]] = []

    def stable() -> bool:
        seen.append((_series(stack, HITS), _series(stack, QUERIES)))
        return len(seen) > 1 and seen[-1] == seen[-2]

    wait_until(stable, 60, 2.5)
    return seen[-1]


def _prompt(phase: str, conversation: int) -> str:
    words = [*WORDS * 12]
    random.Random(f"{phase}-{conversation}").shuffle(words)
    return f"Conversation {phase} {conversation}: " + " ".join(words)


def _phase(stack: RunningStack, phase: str, keyed: bool) -> tuple[float, float]:
    """Prefix-cache hits and queries (tokens) the engines counted for one phase's rounds."""
    hits_before, queries_before = _settled(stack)
    failures: list[str] = []
    for round_index in range(ROUNDS):
        order = [(round_index + i) % CONVERSATIONS for i in range(CONVERSATIONS)]
        threads = []
        for conversation in order:
            body: dict[str, object] = {
                "model": PAIR,
                "prompt": _prompt(phase, conversation),
                "max_tokens": MAX_TOKENS,
                "ignore_eos": True,
            }
            if keyed:
                body["prompt_cache_key"] = f"{phase}-{conversation}"
            thread = threading.Thread(target=_send, args=(stack, body, failures))
            thread.start()
            threads.append(thread)
            time.sleep(STAGGER_S)
        for thread in threads:
            thread.join(timeout=120)
    assert failures == []
    hits_after, queries_after = _settled(stack)
    return hits_after - hits_before, queries_after - queries_before


def _send(stack: RunningStack, body: dict[str, object], failures: list[str]) -> None:
    try:
        reply = httpx.post(f"{stack.base_url}/completions", json=body, headers=AUTH, timeout=120)
        if reply.status_code != 200:
            failures.append(f"{reply.status_code}: {reply.text[:200]}")
    except httpx.HTTPError as exc:
        failures.append(repr(exc))


def test_a_shared_prompt_cache_key_raises_vllms_prefix_cache_hits(pair: RunningStack) -> None:
    unkeyed_hits, unkeyed_queries = _phase(pair, "unkeyed", keyed=False)
    keyed_hits, keyed_queries = _phase(pair, "keyed", keyed=True)
    print(
        f"\nFIGURE affinity prefix-cache hits: keyed {keyed_hits:.0f}/{keyed_queries:.0f} "
        f"tokens, unkeyed {unkeyed_hits:.0f}/{unkeyed_queries:.0f}"
    )
    assert keyed_queries > 0 and unkeyed_queries > 0
    # With the key every second turn hits: half of all prompt tokens, less each prompt's
    # partly filled last block. Without it the second turns go to the other replica and
    # miss; the margin allows for a turn or two the least-loaded choice keeps in place.
    assert keyed_hits / keyed_queries > 0.4, (keyed_hits, keyed_queries)
    assert keyed_hits > 1.5 * unkeyed_hits, (keyed_hits, unkeyed_hits)
