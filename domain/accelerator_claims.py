"""Accelerators held per node (`node -> count`), as models claim and free them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def summed_claims(claims: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Several models' claims as one: per node, the accelerators they hold together."""
    total: dict[str, int] = {}
    for held in claims:
        for node, count in held.items():
            total[node] = total.get(node, 0) + count
    return total
