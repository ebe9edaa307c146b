"""Admission on every change: the policy run against the live cluster.

The inventory comes from the nodes' own probes (`cluster/node_probe/`); this module turns a
deployment config into the policy's request and asks the policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from domain.deployment_config import ModelDeploymentConfig
from policies.admission import AdmissionRequest, Decision, admit
from policies.hf_config import load_model_spec
from policies.inventory import ClusterInventory
from policies.layout import Layout
from policies.memory import KvCacheDtype
from policies.weights import weights_from_model_dir


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
