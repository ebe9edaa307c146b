"""Admission on every change: the policy run against the live cluster.

The inventory comes from the nodes' own probes (`cluster/inventory/`); this module turns a
deployment config into the policy's request and asks the policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from domain.deployment_config import LayoutConfig, ModelDeploymentConfig
from policies.admission import AdmissionRequest, Decision, Objective, admit
from policies.checkpoint.hf_config import load_model_spec
from policies.checkpoint.weights import weights_from_model_dir
from policies.inventory import ClusterInventory
from policies.layout import Layout
from policies.memory import KvCacheDtype


def admission_request(
    config: ModelDeploymentConfig, *, any_layout: bool = False, objective: str = "throughput"
) -> AdmissionRequest:
    """The policy's request for what will be deployed: the same KV dtype, memory share,
    context and batch limits vLLM gets. `any_layout` asks for a recommendation (a layout
    `auto`) instead of judging the config's own."""
    layout = config.layout
    engine = config.engine
    kv = KvCacheDtype.FP8 if engine.kv_cache_dtype.startswith("fp8") else KvCacheDtype.AUTO
    batch: dict[str, int] = {}
    if engine.max_num_seqs is not None:
        batch["max_num_seqs"] = engine.max_num_seqs
    if engine.max_num_batched_tokens is not None:
        batch["max_num_batched_tokens"] = engine.max_num_batched_tokens
    return AdmissionRequest(
        max_model_len=engine.max_model_len,
        gpu_memory_utilization=engine.gpu_memory_utilization,
        kv_cache_dtype=kv,
        layout=None
        if any_layout
        else Layout(tp=layout.tp, pp=layout.pp, dp=layout.dp, ep=layout.ep, dcp=layout.dcp),
        weights_cached_on=frozenset({"cache"}),
        objective=Objective(objective),
        enforce_eager=engine.enforce_eager,
        **batch,
    )


def decide(
    model_dir: Path,
    config: ModelDeploymentConfig,
    inventory: ClusterInventory,
    *,
    freed: Mapping[str, int] | None = None,
    any_layout: bool = False,
    objective: str = "throughput",
) -> Decision:
    spec = load_model_spec(model_dir)
    weights = weights_from_model_dir(model_dir, spec)
    request = admission_request(config, any_layout=any_layout, objective=objective)
    return admit(spec, weights, inventory, request, freed=freed)


def auto_layout_of(decision: Decision, accelerator_kind: str) -> LayoutConfig | None:
    """The layout `layout: auto` deploys: the policy's recommendation for the request's
    objective. The policy never recommends what the deployer refuses (data parallel engine
    groups; expert parallel on the CPU engine, whose stand-in profile it knows); the check
    here keeps that true should a GPU-kind inventory describe a CPU cluster."""
    candidate = decision.recommended
    if candidate is None or (candidate.layout.ep and accelerator_kind == "cpu"):
        return None
    layout = candidate.layout
    return LayoutConfig(tp=layout.tp, pp=layout.pp, dp=layout.dp, ep=layout.ep, dcp=layout.dcp)
