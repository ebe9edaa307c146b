"""Two engines on one set of accelerators: one awake, one asleep (docs/sleep-mode.md).

A model parked by vLLM's sleep mode keeps its engine and its placement. For a second engine
to use the same accelerators, each rank of a sleep-mode engine asks Ray for half an
accelerator (`SHARED_FRACTION`), so Ray lets two such engines onto one node's accelerators;
Ray counts, it does not know which engine is awake. This module is the other half of the
rule, which Ray cannot keep: on every node, the ranks awake (and the whole-accelerator
engines) never outnumber the accelerators, because an awake engine fills its GPU's memory.

Pure: the tenants of each node in, the accelerators a model may count free out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from domain.deployment_config import ModelDeploymentConfig

SHARED_FRACTION = 0.5
"""What one rank of a sleep-mode engine asks of an accelerator: two engines fit on one."""


def shares_accelerators(config: ModelDeploymentConfig, *, stand_in_engine: bool) -> bool:
    """Whether `config`'s ranks take half an accelerator. Only the stand-in engine's do for
    now: vLLM's ranks would each open the accelerator Ray names, and Ray may name one
    accelerator for two ranks of one engine given halves; the per-accelerator binding that
    prevents it is not built (docs/sleep-mode.md)."""
    return bool(config.engine.enable_sleep_mode) and stand_in_engine


@dataclass(frozen=True)
class Tenant:
    """One model's engine as the accelerators of one node see it."""

    model: str
    ranks: int
    shared: bool
    """Its ranks take half an accelerator each (`shares_accelerators`)."""
    awake: bool
    """Serving or starting; False while it sleeps."""


def free_for(
    gpus: int,
    tenants: Iterable[Tenant],
    *,
    shared: bool,
    asleep_after: frozenset[str] = frozenset(),
) -> int:
    """The accelerators of a node with `gpus` that an engine may count free, given its
    `tenants` and those of them that will be put to sleep first (`asleep_after`).

    - A whole-accelerator engine needs accelerators no engine holds (a sleeping engine
      keeps its half).
    - A shared engine needs, per rank, a free half (Ray's count) on an accelerator no
      other engine is awake on (its memory)."""
    tenants = list(tenants)
    whole = sum(t.ranks for t in tenants if not t.shared)
    halves = sum(t.ranks for t in tenants if t.shared)
    if not shared:
        # Two halves fill one accelerator (Ray packs them: the best fit).
        return max(0, gpus - whole - -(-halves // 2))
    awake = sum(t.ranks for t in tenants if t.shared and t.awake and t.model not in asleep_after)
    return max(0, min(2 * (gpus - whole) - halves, gpus - whole - awake))


def awake_beside(
    gpus: int, tenants: Iterable[Tenant], waking: Tenant, evictable: Iterable[str]
) -> tuple[str, ...] | None:
    """The shared engines awake on a node that must sleep before `waking` is awake there,
    taken in the order of `evictable` (least recently used first) until it fits; None when
    even all of those asleep leave no room (the others stay awake)."""
    others = [t for t in tenants if t.model != waking.model]
    whole = sum(t.ranks for t in others if not t.shared)
    awake = {t.model: t.ranks for t in others if t.shared and t.awake}
    used = sum(awake.values())
    room = gpus - whole
    chosen: list[str] = []
    for model in evictable:
        if used + waking.ranks <= room:
            break
        if model in awake:
            chosen.append(model)
            used -= awake[model]
    return tuple(chosen) if used + waking.ranks <= room else None


def node_tenants(
    claims: Mapping[str, Mapping[str, int]],
    shared: Mapping[str, bool],
    awake: Mapping[str, bool],
) -> dict[str, list[Tenant]]:
    """Per node, the tenants: `claims` is model -> node -> ranks there."""
    nodes: dict[str, list[Tenant]] = {}
    for model, by_node in claims.items():
        for node, ranks in by_node.items():
            if ranks > 0:
                nodes.setdefault(node, []).append(
                    Tenant(model, ranks, shared.get(model, False), awake.get(model, True))
                )
    return nodes
