"""Which engine replica a direct-path request goes to (`serve_apps/relay/replica_affinity.py`).

Requests sharing a `prompt_cache_key` (else `user`) stick to one healthy replica, for
vLLM's prefix cache; the choice is the same in every gateway process, survives other
replicas leaving, and gives way to load when the preferred replica is too busy.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from serve_apps.registry.engine_endpoint import EngineEndpoint
from serve_apps.relay.replica_affinity import (
    AFFINITY_SLACK,
    Choice,
    affinity_key,
    choose,
    choose_endpoint,
)


def endpoint(replica_id: str) -> EngineEndpoint:
    return EngineEndpoint(
        app_name="m", replica_id=replica_id, url=f"http://{replica_id}:8000", token="t"
    )


REPLICAS = [endpoint("r-a"), endpoint("r-b"), endpoint("r-c")]
KEYS = [f"conversation-{i}" for i in range(200)]
REPO = Path(__file__).resolve().parents[3]


# ------------------------------------------------------------------------ the affinity key


def test_the_key_is_prompt_cache_key() -> None:
    assert affinity_key({"prompt_cache_key": "k", "user": "u"}) == "k"


def test_user_is_the_key_when_prompt_cache_key_is_missing() -> None:
    assert affinity_key({"user": "u", "model": "m"}) == "u"


@pytest.mark.parametrize("value", [None, "", 7, ["k"], {"k": 1}, True])
def test_non_string_or_empty_values_are_ignored(value: Any) -> None:
    assert affinity_key({"prompt_cache_key": value, "user": "u"}) == "u"
    assert affinity_key({"prompt_cache_key": value, "user": value}) is None


def test_no_key_fields_no_key() -> None:
    assert affinity_key({"model": "m", "messages": []}) is None


# ------------------------------------------------------------------------- stickiness


def test_same_key_same_replica_across_calls() -> None:
    for key in KEYS[:20]:
        chosen = {choose_endpoint(REPLICAS, {}, key).replica_id for _ in range(5)}
        assert len(chosen) == 1


def test_the_choice_does_not_depend_on_candidate_order() -> None:
    for key in KEYS[:20]:
        assert choose_endpoint(REPLICAS, {}, key) == choose_endpoint(REPLICAS[::-1], {}, key)


def test_two_independent_gateway_processes_agree() -> None:
    """The hash is stable, not Python's per-process salted `hash()`."""
    script = (
        "from serve_apps.registry.engine_endpoint import EngineEndpoint\n"
        "from serve_apps.relay.replica_affinity import choose_endpoint\n"
        "eps = [EngineEndpoint('m', r, 'http://' + r + ':8000', 't') "
        "for r in ('r-a', 'r-b', 'r-c')]\n"
        "print(','.join(choose_endpoint(eps, {}, f'conversation-{i}').replica_id "
        "for i in range(50)))\n"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)},
        ).stdout.strip()
        for seed in ("1", "2")
    ]
    here = ",".join(choose_endpoint(REPLICAS, {}, key).replica_id for key in KEYS[:50])
    assert runs[0] == runs[1] == here


def test_different_keys_spread_over_the_replicas() -> None:
    spread = Counter(choose_endpoint(REPLICAS, {}, key).replica_id for key in KEYS)
    assert set(spread) == {"r-a", "r-b", "r-c"}
    assert min(spread.values()) > 200 / 3 / 2  # roughly even, not merely non-empty


def test_a_replica_leaving_moves_only_its_own_keys() -> None:
    before = {key: choose_endpoint(REPLICAS, {}, key).replica_id for key in KEYS}
    remaining = [e for e in REPLICAS if e.replica_id != "r-b"]
    after = {key: choose_endpoint(remaining, {}, key).replica_id for key in KEYS}
    for key in KEYS:
        if before[key] != "r-b":
            assert after[key] == before[key]
    assert {after[key] for key in KEYS if before[key] == "r-b"} <= {"r-a", "r-c"}


def test_a_replica_joining_takes_keys_only_onto_itself() -> None:
    before = {key: choose_endpoint(REPLICAS, {}, key).replica_id for key in KEYS}
    grown = [*REPLICAS, endpoint("r-d")]
    after = {key: choose_endpoint(grown, {}, key).replica_id for key in KEYS}
    moved = [key for key in KEYS if after[key] != before[key]]
    assert moved
    assert all(after[key] == "r-d" for key in moved)


# ------------------------------------------------------------------------ bounded load


def preferred(key: str) -> EngineEndpoint:
    return choose_endpoint(REPLICAS, {}, key)


def test_the_affine_replica_is_kept_up_to_min_load_plus_slack() -> None:
    key = KEYS[0]
    home = preferred(key)
    load = {e.url: 1 for e in REPLICAS} | {home.url: 1 + AFFINITY_SLACK}
    assert choose(REPLICAS, load, key) == (home, Choice.AFFINE)


def test_a_busier_affine_replica_spills_to_the_least_loaded() -> None:
    key = KEYS[0]
    home = preferred(key)
    others = [e for e in REPLICAS if e != home]
    load = {home.url: 2 + AFFINITY_SLACK, others[0].url: 1, others[1].url: 2 + AFFINITY_SLACK}
    chosen, how = choose(REPLICAS, load, key)
    assert chosen == others[0]
    assert how is Choice.SPILLED


def test_a_spilled_key_goes_to_its_next_replica_within_the_bound() -> None:
    """Spilling follows the key's own order too, so its spill-over also warms one cache."""
    key = KEYS[0]
    home = preferred(key)
    second = choose_endpoint([e for e in REPLICAS if e != home], {}, key)
    load = {e.url: 0 for e in REPLICAS} | {home.url: AFFINITY_SLACK + 1}
    assert choose(REPLICAS, load, key) == (second, Choice.SPILLED)


def test_slack_zero_is_plain_least_loaded_with_affine_tie_break() -> None:
    key = KEYS[0]
    home = preferred(key)
    load = {e.url: 3 for e in REPLICAS} | {home.url: 4}
    chosen = choose_endpoint(REPLICAS, load, key, slack=0)
    assert chosen != home
    assert load[chosen.url] == 3


# ------------------------------------------------------------------------------ no key


def test_no_key_picks_the_least_outstanding() -> None:
    load = {"http://r-a:8000": 3, "http://r-b:8000": 1, "http://r-c:8000": 2}
    assert choose(REPLICAS, load, None) == (REPLICAS[1], Choice.NO_KEY)


def test_no_key_ties_go_to_the_first_and_unknown_urls_count_as_idle() -> None:
    assert choose_endpoint(REPLICAS, {}, None) == REPLICAS[0]
    assert choose_endpoint(REPLICAS, {"http://r-a:8000": 1}, None) == REPLICAS[1]


def test_a_single_replica_is_always_chosen() -> None:
    only = [REPLICAS[0]]
    assert choose_endpoint(only, {only[0].url: 100}, "k") == only[0]
    assert choose_endpoint(only, {}, None) == only[0]


def test_no_candidates_is_an_error() -> None:
    with pytest.raises(ValueError):
        choose_endpoint([], {}, "k")
