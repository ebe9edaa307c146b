"""Placement groups from a layout: which bundles one replica needs and how they pack."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from domain.accelerator_sharing import SHARED_FRACTION
from domain.deployment_config import AcceleratorConfig, LayoutConfig

Strategy = Literal["STRICT_PACK", "PACK", "SPREAD"]


@dataclass(frozen=True)
class PlacementSpec:
    """Bundles for one replica (one per TP x PP rank) and the packing strategy."""

    bundles: tuple[dict[str, float], ...]
    strategy: Strategy
    label_selectors: tuple[dict[str, str], ...] | None = None
    """Per-bundle node label selectors: pins each PP stage's ranks to the node the plan chose."""

    def as_ray_serve_llm(self) -> dict[str, object]:
        return {"bundles": [dict(b) for b in self.bundles], "strategy": self.strategy}


def placement_for(
    layout: LayoutConfig,
    accelerator: AcceleratorConfig,
    *,
    pp_across_nodes: bool = False,
    stage_nodes: tuple[str, ...] | None = None,
    shared: bool = False,
) -> PlacementSpec:
    """One bundle per rank of a replica.

    TP ranks all-reduce every layer, so a replica without PP must sit on one node
    (STRICT_PACK). With PP, stages exchange activations only once per stage boundary, so
    they may span nodes, but only when the admission policy planned it (`pp_across_nodes`);
    otherwise they are packed too.

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
    strategy: Strategy = "PACK" if layout.pp > 1 and pp_across_nodes else "STRICT_PACK"
    selectors = None
    if stage_nodes is not None:
        if len(stage_nodes) != layout.pp:
            raise ValueError(
                f"stage_nodes names {len(stage_nodes)} nodes for pp={layout.pp}; give one per stage"
            )
        # Bundles are ordered stage by stage (vLLM rank = stage * tp + tp_rank).
        selectors = tuple(
            {"ray.io/node-id": node} for node in stage_nodes for _ in range(layout.tp)
        )
    return PlacementSpec(bundles=bundles, strategy=strategy, label_selectors=selectors)
