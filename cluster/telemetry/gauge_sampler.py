"""Samples what the manager's gauges show (models, aliases, accelerators, disk) on a period.

Runs as a thread of the manager actor. Staged bytes and disk free are measured on the
manager's own node (the head, where the staging cache of a local cluster lives); other
nodes report accelerators only.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from cluster.fleet.fleet_metrics import NodeUsage
from cluster.staging.integrity import bytes_on_disk
from cluster.telemetry.ray_fleet_metrics import RayFleetMetrics
from domain.deployment_config import AcceleratorConfig
from domain.engine_capacity import ModelCapacity
from serve_apps.internals import available_resources_per_node

log = logging.getLogger(__name__)

NODE_ID_CHARS = 12
"""Node labels are Ray node ids cut to 12 characters (as the manager's own messages show)."""

Resources = Mapping[str, Mapping[str, float]]


def accelerator_resource(accelerator: AcceleratorConfig) -> str:
    if accelerator.kind == "gpu":
        return "GPU"
    return accelerator.standin_resource or "CPU"


def node_usage(
    totals: Resources,
    available: Resources,
    resource: str,
    *,
    local_nodes: Collection[str],
    staged_bytes: int | None,
    disk_free_bytes: int | None,
) -> list[NodeUsage]:
    """One row per node with the accelerator resource; the nodes on the manager's machine
    (`local_nodes`: its own, and a fault-tolerant head's data node, which holds the
    accelerators and shares the machine's cache) get the disk figures measured there."""
    usage = []
    for node_id, resources in sorted(totals.items()):
        total = int(resources.get(resource, 0))
        if total == 0:
            continue
        free = int(available.get(node_id, {}).get(resource, total))
        local = node_id in local_nodes
        usage.append(
            NodeUsage(
                node=node_id[:NODE_ID_CHARS],
                accelerators=total,
                accelerators_claimed=max(total - free, 0),
                staged_bytes=staged_bytes if local else None,
                disk_free_bytes=disk_free_bytes if local else None,
            )
        )
    return usage


def kv_prediction_ratios(
    capacity: Mapping[str, ModelCapacity], served: Collection[str]
) -> dict[str, float]:
    """Observed over predicted KV tokens of each served model whose engine logged its KV
    cache size (a fake engine logs none)."""
    ratios = {}
    for name in served:
        known = capacity.get(name)
        ratio = known.kv_prediction_ratio if known is not None else None
        if ratio is not None:
            ratios[name] = ratio
    return ratios


class FleetSampler:
    def __init__(
        self,
        metrics: RayFleetMetrics,
        registry: Any,
        accelerator: AcceleratorConfig,
        cache_dir: Path,
        period_s: float,
        capacity: Callable[[], Mapping[str, ModelCapacity]] = dict,
    ) -> None:
        self._metrics = metrics
        self._capacity = capacity
        self._registry = registry
        self._resource = accelerator_resource(accelerator)
        self._cache_dir = cache_dir
        self._period_s = period_s
        self._stop = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="fleet-sampler", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception:
                log.exception("sampling the fleet's metrics failed; retrying")
            self._stop.wait(self._period_s)

    def sample(self) -> None:
        import ray

        table = ray.get(self._registry.table.remote())
        live = table.live_models()
        self._metrics.fleet({r.name: r.state for r in live}, table.aliases)
        self._metrics.kv_prediction(kv_prediction_ratios(self._capacity(), {r.name for r in live}))
        alive = [n for n in ray.nodes() if n["Alive"]]  # type: ignore[no-untyped-call]
        totals = {n["NodeID"]: n["Resources"] for n in alive}
        here = ray.get_runtime_context().get_node_id()
        my_ip = next((n["NodeManagerAddress"] for n in alive if n["NodeID"] == here), None)
        local_nodes = {here} | {n["NodeID"] for n in alive if n["NodeManagerAddress"] == my_ip}
        available = available_resources_per_node()
        models_dir = self._cache_dir / "models"
        staged = bytes_on_disk(models_dir) if models_dir.is_dir() else 0
        disk_root = self._cache_dir if self._cache_dir.exists() else self._cache_dir.parent
        self._metrics.nodes(
            node_usage(
                totals,
                available,
                self._resource,
                local_nodes=local_nodes,
                staged_bytes=staged,
                disk_free_bytes=shutil.disk_usage(disk_root).free,
            )
        )
        self._metrics.refresh()
