"""Which engine replica a direct-path request goes to: prefix-cache affinity, bounded load.

vLLM keeps a prefix cache per engine, so a conversation (or an agent's long shared system
prompt) is cheapest on the replica that already holds its prefix. Clients name that group
with OpenAI's `prompt_cache_key` (or, failing that, `user`); requests with the same key go to
the same healthy replica. Rendezvous (highest-random-weight) hashing over the replica ids
gives every key an order of preference that depends on the key and the replica set only:
gateways in other processes and on other nodes agree without talking, and a replica that
leaves moves only the keys that were on it. The hash is blake2b, not Python's `hash()`,
which is salted per process.

Affinity must not defeat load balancing: a hot key would otherwise pile onto one engine
while the others idle. So a key takes the first replica in its order whose requests in
flight (from this gateway) are within `slack` of the least loaded one's. Requests without a
key go to the least loaded replica, as before.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from serve_apps.registry.engine_endpoint import EngineEndpoint

AFFINITY_SLACK = 4
"""How many more requests in flight than the least loaded replica an affine replica may
have and still be chosen. vLLM batches continuously, so a few extra concurrent requests cost
little next to recomputing a long prefix; far more than that and the queue wait outweighs
the cache hit, so the key spills to the least loaded replica (and warms it)."""


class Choice(enum.Enum):
    """How `choose` picked the replica (the unit spec reads it; the gateway takes the replica)."""

    NO_KEY = "no_key"
    """No affinity key: the least loaded replica."""
    AFFINE = "affine"
    """The key's preferred healthy replica."""
    SPILLED = "spilled"
    """The preferred replica was over the load bound: the key's next one within it."""


def affinity_key(body: Mapping[str, Any]) -> str | None:
    """The request's `prompt_cache_key` if a non-empty string, else its `user`, else None."""
    for field in ("prompt_cache_key", "user"):
        value = body.get(field)
        if isinstance(value, str) and value:
            return value
    return None


def _weight(key: str, replica_id: str) -> int:
    digest = hashlib.blake2b(
        key.encode("utf-8", "surrogatepass") + b"\x00" + replica_id.encode("utf-8", "replace"),
        digest_size=8,
    ).digest()
    return int.from_bytes(digest, "big")


def rendezvous_order(candidates: Sequence[EngineEndpoint], key: str) -> list[EngineEndpoint]:
    """`candidates` in the key's order of preference (highest weight first; ties by id)."""
    return sorted(candidates, key=lambda e: (-_weight(key, e.replica_id), e.replica_id))


def choose(
    candidates: Sequence[EngineEndpoint],
    load: Mapping[str, int],
    key: str | None,
    *,
    slack: int = AFFINITY_SLACK,
) -> tuple[EngineEndpoint, Choice]:
    """`choose_endpoint`, and how it chose."""
    if not candidates:
        raise ValueError("no candidate endpoints")
    if key is None:
        return min(candidates, key=lambda e: load.get(e.url, 0)), Choice.NO_KEY
    bound = min(load.get(e.url, 0) for e in candidates) + slack
    order = rendezvous_order(candidates, key)
    for index, endpoint in enumerate(order):
        if load.get(endpoint.url, 0) <= bound:
            return endpoint, Choice.AFFINE if index == 0 else Choice.SPILLED
    raise AssertionError("the least loaded endpoint is always within the bound")


def choose_endpoint(
    candidates: Sequence[EngineEndpoint],
    load: Mapping[str, int],
    key: str | None,
    *,
    slack: int = AFFINITY_SLACK,
) -> EngineEndpoint:
    """The replica for a request with affinity `key` (None: none), `candidates` non-empty.

    No key: the one with the fewest requests in flight in `load` (by URL; the first on
    ties). A key: the first in the key's rendezvous order whose load is at most the least
    load plus `slack`."""
    return choose(candidates, load, key, slack=slack)[0]
