"""Admission on every change: the policy run against the live cluster.

The inventory comes from the nodes' own probes (`cluster/inventory/`); this module turns a
deployment config into the policy's request and asks the policy.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from domain.deployment_config import LayoutConfig, ModelDeploymentConfig
from domain.engine_capacity import CapacityFigures, CapacityKey, capacity_key
from policies.admission import AdmissionRequest, Decision, Objective, ObservedKv, admit
from policies.checkpoint.hf_config import load_model_spec
from policies.checkpoint.weights import weights_from_model_dir
from policies.inventory import ClusterInventory
from policies.layout import Layout
from policies.memory import KvCacheDtype
from policies.units import GIB
from policies.vllm_versions import (
    NEWEST_SUPPORTED,
    OLDEST_SUPPORTED,
    MemoryRules,
    VllmVersion,
)
from serve_apps.engine.serve_llm_imports import installed_vllm_version as installed_version


def admission_request(
    config: ModelDeploymentConfig,
    *,
    any_layout: bool = False,
    objective: str = "throughput",
    observed: ObservedKv | None = None,
) -> AdmissionRequest:
    """The policy's request for what will be deployed: the same KV dtype, memory share,
    context and batch limits vLLM gets, under the installed vLLM's memory rules. `any_layout`
    asks for a recommendation (a layout `auto`) instead of judging the config's own;
    `observed` is what an engine of the same deployment logged."""
    layout = config.layout
    engine = config.engine
    explicit_kv = engine.extra.get("kv_cache_memory_bytes")
    if config.accelerator.kind == "cpu":
        # vLLM's CPU engine takes VLLM_CPU_KVCACHE_SPACE as its KV cache outright.
        explicit_kv = int(config.accelerator.cpu_kv_cache_space_gib * GIB)
    kv = KvCacheDtype.FP8 if engine.kv_cache_dtype.startswith("fp8") else KvCacheDtype.AUTO
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
        vllm=engine_memory_rules(),
        kv_cache_memory_bytes=None if explicit_kv is None else int(explicit_kv),
        language_model_only=bool(engine.extra.get("language_model_only", False)),
        observed_kv=None if any_layout else observed,
        max_num_seqs=engine.max_num_seqs,
        max_num_batched_tokens=engine.max_num_batched_tokens,
    )


def installed_vllm_version() -> str:
    """The vLLM the engines run (the cluster's one environment), else the newest version
    the memory rules know."""
    return installed_version() or str(NEWEST_SUPPORTED)


def installed_rules_version() -> VllmVersion:
    """The version whose memory rules apply to the installed vLLM: itself, or the nearest
    supported one outside 0.10-0.32."""
    installed = VllmVersion.parse(installed_vllm_version())
    return max(min(installed, NEWEST_SUPPORTED), OLDEST_SUPPORTED)


def engine_memory_rules() -> MemoryRules:
    """The installed vLLM's rules, with the CUDA-graph estimate and sampler flags the
    engines inherit."""
    return MemoryRules.from_environment(installed_rules_version(), os.environ)


def deployment_key(
    config: ModelDeploymentConfig, model_dir: Path, inventory: ClusterInventory
) -> CapacityKey:
    """What an observed KV figure of `config`'s deployment is valid for (its GPU kind: the
    inventory's first pool, the only one a fleet of one accelerator kind has)."""
    gpu = inventory.pools()[0][0].name
    return capacity_key(
        config,
        config_json=(model_dir / "config.json").read_bytes(),
        gpu_profile=gpu,
        vllm_version=str(VllmVersion.parse(installed_vllm_version())),
        environment=os.environ,
    )


def observed_kv(
    known: Mapping[str, CapacityFigures],
    config: ModelDeploymentConfig,
    model_dir: Path,
    inventory: ClusterInventory,
) -> ObservedKv | None:
    """An engine's logged KV size for this very deployment, if the fleet has one."""
    try:
        digest = deployment_key(config, model_dir, inventory).digest()
    except OSError:
        return None
    figures = known.get(digest)
    if figures is None or figures.kv_cache_tokens is None:
        return None
    layout = config.layout
    return ObservedKv(
        layout=Layout(tp=layout.tp, pp=layout.pp, dp=layout.dp, ep=layout.ep, dcp=layout.dcp),
        kv_cache_tokens=figures.kv_cache_tokens,
    )


def decide(
    model_dir: Path,
    config: ModelDeploymentConfig,
    inventory: ClusterInventory,
    *,
    freed: Mapping[str, int] | None = None,
    any_layout: bool = False,
    objective: str = "throughput",
    observed: Mapping[str, CapacityFigures] | None = None,
) -> Decision:
    """The policy's decision for `config`; `observed`: the fleet's logged KV figures by
    `CapacityKey` digest (one for this deployment replaces the model's prediction)."""
    spec = load_model_spec(model_dir)
    weights = weights_from_model_dir(model_dir, spec)
    seen = observed_kv(observed, config, model_dir, inventory) if observed else None
    request = admission_request(config, any_layout=any_layout, objective=objective, observed=seen)
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
