"""Placement groups from a layout: which bundles one replica needs and how they pack."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from domain.accelerator_sharing import SHARED_FRACTION
from domain.deployment_config import AcceleratorConfig, LayoutConfig, PlannedPlacement

Strategy = Literal["STRICT_PACK", "PACK", "SPREAD"]

NODE_ID_LABEL = "ray.io/node-id"
ACCELERATOR_TYPE_LABEL = "ray.io/accelerator-type"
"""Ray's default node labels: its id, and on a GPU node the kind Ray derives from NVML's name
(`NvidiaGPUAcceleratorManager`, "NVIDIA H100 80GB HBM3" -> "H100")."""


@dataclass(frozen=True)
class PlacementSpec:
    """Bundles for one replica (one per TP x PP rank) and the packing strategy."""

    bundles: tuple[dict[str, float], ...]
    strategy: Strategy
    label_selectors: tuple[dict[str, str], ...] | None = None
    """Per-bundle node label selectors: the node admission chose for each rank of a replica
    that spans nodes, and the GPU kind admission planned with."""

    def as_ray_serve_llm(self) -> dict[str, object]:
        return {"bundles": [dict(b) for b in self.bundles], "strategy": self.strategy}

    def serve_deployment_options(self) -> dict[str, Any]:
        """What Serve's deployment takes beside the bundles: Ray Serve LLM's
        `placement_group_config` has no label selectors, but it passes its
        `deployment_config` on to Serve, whose deployments take one per bundle."""
        if self.label_selectors is None:
            return {}
        return {"placement_group_bundle_label_selector": [dict(s) for s in self.label_selectors]}


def placement_for(
    layout: LayoutConfig,
    accelerator: AcceleratorConfig,
    *,
    planned: PlannedPlacement | None = None,
    shared: bool = False,
) -> PlacementSpec:
    """One bundle per rank of a replica.

    TP ranks all-reduce every layer, so a replica admission put on one node is packed there
    (STRICT_PACK). One that admission spread over nodes (pipeline stages, or a TP group on
    whole nodes) is packed loosely (PACK) with each rank's bundle pinned to the node admission
    chose for it (`planned.rank_nodes`, stage by stage: vLLM's Ray executor groups its
    workers by node, so each stage's ranks are the ones on its node).

    `shared`: each rank asks for half an accelerator, so a sleeping engine and an awake one
    fit on the same accelerators (domain/accelerator_sharing.py).
    """
    share = SHARED_FRACTION if shared else 1.0
    if accelerator.kind == "gpu":
        bundle: dict[str, float] = {"GPU": share}
    else:
        bundle = {"CPU": 1.0}
        if accelerator.standin_resource:
            bundle[accelerator.standin_resource] = share
    bundles = tuple(dict(bundle) for _ in range(layout.gpus_per_replica))
    planned = planned or PlannedPlacement()
    pinned = bool(planned.rank_nodes)
    if pinned and len(planned.rank_nodes) != len(bundles):
        raise ValueError(
            f"planned placement names {len(planned.rank_nodes)} nodes for "
            f"{len(bundles)} ranks of {layout}; give one per rank"
        )
    strategy: Strategy = "PACK" if pinned else "STRICT_PACK"
    selectors: list[dict[str, str]] = [{} for _ in bundles]
    for i, selector in enumerate(selectors):
        if pinned:
            selector[NODE_ID_LABEL] = planned.rank_nodes[i]
        if planned.accelerator_type and accelerator.kind == "gpu":
            selector[ACCELERATOR_TYPE_LABEL] = planned.accelerator_type
    chosen = tuple(selectors) if any(selectors) else None
    return PlacementSpec(bundles=bundles, strategy=strategy, label_selectors=chosen)
