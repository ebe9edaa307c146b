"""Can a replica's placement group be placed on the cluster as it is now?

Asked before anything is deployed: Ray would otherwise keep an infeasible placement group
pending forever and the model would sit in LOADING. Pure: takes each node's available
resources (from `ray.available_resources_per_node()` or a probe) and answers with a reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from serve_apps.engine.placement_bundles import (
    ACCELERATOR_TYPE_LABEL,
    NODE_ID_LABEL,
    PlacementSpec,
)

NodeResources = Mapping[str, float]


def _fits(bundle: Mapping[str, float], free: Mapping[str, float]) -> bool:
    return all(free.get(key, 0.0) + 1e-9 >= amount for key, amount in bundle.items())


def _take(bundle: Mapping[str, float], free: dict[str, float]) -> None:
    for key, amount in bundle.items():
        free[key] = free.get(key, 0.0) - amount


def placement_problem(
    spec: PlacementSpec, nodes: Mapping[str, NodeResources], *, replicas: int = 1
) -> str | None:
    """None if `replicas` copies of `spec` can be placed now on `nodes` (available resources
    by Ray node id), else why not (one line). A bundle's label selector is kept: its node id,
    and its accelerator type as the `accelerator_type:` resource Ray gives the same nodes."""
    ids = list(nodes)
    free = [dict(nodes[i]) for i in ids]
    selectors = spec.label_selectors or tuple({} for _ in spec.bundles)
    for replica in range(replicas):
        if spec.strategy == "STRICT_PACK":
            host = next(
                (
                    i
                    for i, f in enumerate(free)
                    if _fits_all(spec.bundles, f) and all(_selects(s, ids[i], f) for s in selectors)
                ),
                None,
            )
            if host is None:
                return _strict_pack_reason(spec, free, replica)
            for bundle in spec.bundles:
                _take(bundle, free[host])
            continue
        for index, (bundle, selector) in enumerate(zip(spec.bundles, selectors, strict=True)):
            host = next(
                (
                    i
                    for i, f in enumerate(free)
                    if _fits(bundle, f) and _selects(selector, ids[i], f)
                ),
                None,
            )
            if host is None:
                where = _where(selector)
                return (
                    f"replica {replica + 1}: bundle {index + 1} of {len(spec.bundles)} "
                    f"({_fmt(bundle)}) fits on no node{where}"
                )
            _take(bundle, free[host])
    return None


def _selects(selector: Mapping[str, str], node_id: str, free: Mapping[str, float]) -> bool:
    node = selector.get(NODE_ID_LABEL)
    kind = selector.get(ACCELERATOR_TYPE_LABEL)
    if node is not None and node != node_id:
        return False
    return kind is None or f"accelerator_type:{kind}" in free


def _where(selector: Mapping[str, str]) -> str:
    parts = []
    if NODE_ID_LABEL in selector:
        parts.append(f"node {selector[NODE_ID_LABEL][:12]}, where admission placed it")
    if ACCELERATOR_TYPE_LABEL in selector:
        parts.append(f"GPU kind {selector[ACCELERATOR_TYPE_LABEL]}")
    return f" ({'; '.join(parts)})" if parts else ""


def _fits_all(bundles: Sequence[Mapping[str, float]], free: Mapping[str, float]) -> bool:
    scratch = dict(free)
    for bundle in bundles:
        if not _fits(bundle, scratch):
            return False
        _take(bundle, scratch)
    return True


def _strict_pack_reason(
    spec: PlacementSpec, free: Sequence[Mapping[str, float]], replica: int
) -> str:
    need: dict[str, float] = {}
    for bundle in spec.bundles:
        for key, amount in bundle.items():
            need[key] = need.get(key, 0.0) + amount
    # Name what is short: a node with the accelerators may lack the CPUs (fake engines
    # and small heads run out of CPUs first).
    short = [k for k in need if max((f.get(k, 0.0) for f in free), default=0.0) < need[k]]
    if not short:
        short = [next((k for k in need if k != "CPU"), "CPU")]
    most = ", ".join(f"{k} {max((f.get(k, 0.0) for f in free), default=0.0):g}" for k in short)
    return (
        f"replica {replica + 1} needs {_fmt(need)} on one node (its tensor-parallel ranks "
        f"must share a node), but the most free on any node is {most}"
    )


def _fmt(resources: Mapping[str, float]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in sorted(resources.items()))
