"""Admission on every change: the policy run against the live cluster.

`inventory_from_resources` turns Ray's per-node resources into the policy's typed inventory
(pure, unit-tested). GPU nodes are recognised by Ray's `GPU` resource and their
`accelerator_type:<KIND>` resource; CPU nodes by the stand-in resource they declare.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from policies.admission import AdmissionRequest, Decision, admit
from policies.inventory import ClusterInventory, GpuProfile, NodeInventory, gpu_profile
from policies.layout import Layout
from policies.memory import KvCacheDtype
from policies.model_spec import load_model_spec
from policies.weights import weights_from_model_dir
from serve_apps.deployment_config import AcceleratorConfig, ModelDeploymentConfig

Resources = Mapping[str, float]


def _gpu_kind(resources: Resources) -> str | None:
    for key in resources:
        if key.startswith("accelerator_type:"):
            return key.removeprefix("accelerator_type:")
    return None


def inventory_from_resources(
    totals: Mapping[str, Resources],
    available: Mapping[str, Resources],
    accelerator: AcceleratorConfig,
    *,
    standin_memory_gib: float,
    disk_free_bytes: int | None,
    default_gpu_kind: str = "h100",
) -> ClusterInventory:
    nodes: list[NodeInventory] = []
    for node_id, total in sorted(totals.items()):
        free = available.get(node_id, {})
        if accelerator.kind == "gpu":
            count = int(total.get("GPU", 0))
            if count == 0:
                continue
            profile = gpu_profile(_gpu_kind(total) or default_gpu_kind)
            free_count = int(free.get("GPU", 0))
        else:
            key = accelerator.standin_resource or "CPU"
            count = int(total.get(key, 0))
            if count == 0:
                continue
            profile = GpuProfile.cpu_standin(standin_memory_gib)
            free_count = int(free.get(key, 0))
        nodes.append(
            NodeInventory(
                name=node_id[:12],
                gpu=profile,
                gpus=count,
                free_gpus=free_count,
                disk_free_bytes=disk_free_bytes,
                host_ram_bytes=int(total.get("memory", 0)) or None,
                # One cache volume: the head's state directory (shared staging mode).
                storage="cache",
            )
        )
    return ClusterInventory(nodes=tuple(nodes))


def admission_request(config: ModelDeploymentConfig) -> AdmissionRequest:
    layout = config.layout
    kv = KvCacheDtype.FP8 if config.engine.kv_cache_dtype.startswith("fp8") else KvCacheDtype.AUTO
    return AdmissionRequest(
        max_model_len=config.engine.max_model_len,
        gpu_memory_utilization=config.engine.gpu_memory_utilization,
        kv_cache_dtype=kv,
        layout=Layout(tp=layout.tp, pp=layout.pp, dp=layout.dp, ep=layout.ep),
        weights_cached_on=frozenset({"cache"}),
    )


def decide(
    model_dir: Path,
    config: ModelDeploymentConfig,
    inventory: ClusterInventory,
    *,
    freed: Mapping[str, int] | None = None,
) -> Decision:
    spec = load_model_spec(model_dir)
    weights = weights_from_model_dir(model_dir, spec)
    return admit(spec, weights, inventory, admission_request(config), freed=freed)
