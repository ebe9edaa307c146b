"""The admission decision: which layouts vLLM would accept, which fit, which to use, and why not.

`admit` enumerates candidate layouts on each GPU kind of the inventory (or judges the one
layout asked for), applies the layout rules, places the TP groups on free GPUs, checks disk,
estimates memory, the single-stream ceiling and the throughput at load, and ranks what is
usable (valid, fitting, and deployable by Switchyard) by the request's objective:

- latency: the single-stream decode ceiling (`policies.cost_model`), then fewer GPUs, then
  more KV concurrency;
- throughput: replicas multiply throughput, but nothing multiplies one stream's speed; so
  this objective keeps the GPU count of the smallest layout that serves the model (more
  GPUs go to replicas, each judged alone) and takes the highest sustained decode throughput
  at saturation among layouts of that size (`policies.throughput`); then expert parallel
  (whole experts keep the grouped GEMMs at full width, which the ceiling does not price),
  then latency.

The recommended layout is the first usable one of that order; the decision also carries the
best usable layout of each objective.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from policies.batch_defaults import batch_defaults
from policies.checkpoint.model_spec import ModelSpec
from policies.checkpoint.parameters import ModelBytes, model_bytes
from policies.checkpoint.weights import WeightSize, estimate_weights, override_weights
from policies.cost_model import decode_cost
from policies.engine_memory import EngineSettings, FittedConstants, cuda_context_bytes
from policies.errors import InvalidRequest
from policies.inventory import ClusterInventory, GpuProfile, Interconnect, NodeInventory
from policies.layout import Layout
from policies.layout_rules import (
    check_model_rules,
    decode_context_parallel_backend,
    tensor_parallel_within_node,
)
from policies.memory import KvCacheDtype, estimate_memory, with_observed_kv
from policies.placement import Placer
from policies.reasons import Reason, ReasonCode
from policies.throughput import throughput
from policies.units import gib
from policies.vllm_versions import MemoryRules


class KvSource(StrEnum):
    """Where a candidate's KV capacity comes from (`kv_source` in a verdict)."""

    MODEL = "model"
    """The memory model (`policies.memory`, `policies.engine_memory`)."""
    OBSERVED = "observed"
    """An engine of this cluster logged it for the same deployment: same config, GPU
    profile, layout, vLLM version, engine settings and memory-relevant environment."""


@dataclass(frozen=True)
class ObservedKv:
    """The KV cache size an engine of the judged deployment logged ("GPU KV cache size")."""

    layout: Layout
    kv_cache_tokens: int


class Objective(StrEnum):
    """What `recommended` optimises."""

    LATENCY = "latency"
    """The single-stream decode ceiling (one user's tokens/s)."""
    THROUGHPUT = "throughput"
    """Aggregate decode tokens/s with the batch full, on the fewest GPUs that serve the model."""


@dataclass(frozen=True)
class AdmissionRequest:
    """What the operator asks for, in vLLM's engine terms."""

    max_model_len: int | None = None
    """None means the model's full context (vLLM's default)."""
    gpu_memory_utilization: float = 0.9
    kv_cache_dtype: KvCacheDtype = KvCacheDtype.AUTO
    layout: Layout | None = None
    """Judge only this layout instead of enumerating candidates."""
    weights_override_bytes: int | None = None
    max_num_batched_tokens: int | None = None
    """None: vLLM's default for the GPU (`policies.batch_defaults`)."""
    max_num_seqs: int | None = None
    """None: vLLM's default for the GPU."""
    weights_cached_on: frozenset[str] = field(default_factory=frozenset)
    """Storage ids (`NodeInventory.storage_id`) that already hold the weights."""
    dcp: int | None = None
    """Enumerate only layouts with this decode-context-parallel size (None: all)."""
    objective: Objective = Objective.THROUGHPUT
    enforce_eager: bool = False
    vllm: MemoryRules = field(default_factory=MemoryRules.newest)
    """The vLLM version's rules: which terms it subtracts before sizing the KV cache."""
    kv_cache_memory_bytes: int | None = None
    """KV space given outright (`--kv-cache-memory-bytes`, VLLM_CPU_KVCACHE_SPACE)."""
    language_model_only: bool = False
    """vLLM's `--language-model-only`: a multimodal wrapper's encoder is not loaded."""
    observed_kv: ObservedKv | None = None
    """What an engine of this deployment logged; used for its layout instead of the model."""
    constants: FittedConstants = field(default_factory=FittedConstants)
    """The memory model's fitted constants (the calibration suite varies them)."""
    full_cuda_graphs: bool | None = None
    """FULL graphs too (None: the vLLM version's default mode); False for
    `cudagraph_mode: PIECEWISE`."""

    def __post_init__(self) -> None:
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise InvalidRequest(
                f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}"
            )
        if self.max_model_len is not None and self.max_model_len < 1:
            raise InvalidRequest(f"max_model_len must be >= 1, got {self.max_model_len}")
        if self.weights_override_bytes is not None and self.weights_override_bytes <= 0:
            raise InvalidRequest(
                f"weights override must be > 0 bytes, got {self.weights_override_bytes}"
            )
        if self.language_model_only and not self.vllm.language_model_only:
            raise InvalidRequest(
                f"--language-model-only does not exist in vLLM {self.vllm.version} "
                "(it is there from 0.17)"
            )
        for name in ("max_num_batched_tokens", "max_num_seqs", "dcp", "kv_cache_memory_bytes"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InvalidRequest(f"{name} must be >= 1, got {value}")


@dataclass(frozen=True)
class Candidate:
    """One layout on one GPU kind, judged."""

    layout: Layout
    gpu: str
    valid: bool
    """Passes every layout rule (vLLM would build the model)."""
    fits: bool
    """Placeable on free GPUs, weights and one full-length request fit, disk holds weights."""
    reasons: tuple[Reason, ...]
    weights_bytes_per_gpu: int
    kv_bytes_per_token_per_gpu: int
    kv_cache_tokens: int
    max_concurrency: float
    max_model_len_fit: int
    decode_tok_s_ceiling: float
    nodes: tuple[str, ...] = ()
    """Nodes the placement uses (empty when it cannot be placed)."""
    groups: tuple[tuple[str, ...], ...] = ()
    """Per TP group (pipeline stage) of one replica, in stage order, the node(s) its GPUs
    are on: what the deployer pins a replica that spans nodes to."""
    deployable: bool = True
    """Switchyard's deployer runs this layout (see `ReasonCode.NOT_DEPLOYABLE`)."""
    memory_breakdown: Mapping[str, int] = field(default_factory=dict)
    """Bytes per GPU by `MemoryTerm`, on the stage that limits the KV cache."""
    kv_cache_bytes: int = 0
    """What that stage's GPU has left for the KV cache ("Available KV cache memory")."""
    throughput_tok_s_ceiling: float = 0.0
    saturation_concurrency: int = 0
    kv_source: KvSource = KvSource.MODEL

    @property
    def usable(self) -> bool:
        return self.valid and self.fits and self.deployable

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "tp": self.layout.tp,
            "pp": self.layout.pp,
            "dp": self.layout.dp,
            "ep": self.layout.ep,
            "dcp": self.layout.dcp,
            "valid": self.valid,
            "fits": self.fits,
            "deployable": self.deployable,
            "reasons": [str(r) for r in self.reasons],
            "weights_gib_per_gpu": round(gib(self.weights_bytes_per_gpu), 2),
            "memory_breakdown": dict(self.memory_breakdown),
            "kv_cache_bytes": self.kv_cache_bytes,
            "kv_bytes_per_token_per_gpu": self.kv_bytes_per_token_per_gpu,
            "kv_cache_tokens": self.kv_cache_tokens,
            "kv_source": self.kv_source.value,
            "max_concurrency": round(self.max_concurrency, 2),
            "decode_tok_s_ceiling": round(self.decode_tok_s_ceiling, 1),
            "saturation_concurrency": self.saturation_concurrency,
            "throughput_tok_s_ceiling": round(self.throughput_tok_s_ceiling, 1),
        }


@dataclass(frozen=True)
class Decision:
    admitted: bool
    reasons: tuple[Reason, ...]
    recommended: Candidate | None
    candidates: tuple[Candidate, ...]
    weights: WeightSize
    max_model_len: int
    objective: Objective = Objective.THROUGHPUT
    recommended_by_objective: Mapping[Objective, Candidate | None] = field(default_factory=dict)

    def to_json_dict(self, max_candidates: int | None = None) -> dict[str, Any]:
        """The decision as JSON; at most `max_candidates` candidates (None: all of them).

        The candidates grow with the cluster (data-parallel sizes up to its accelerators:
        about 2,200 for Kimi-K2.5 on 512 nodes of 8, 1.5 MB), so a bounded answer lists the
        recommended ones, then the usable ones, then the refused ones, each in the order
        considered, and counts what it leaves out by reason code."""

        def as_json(c: Candidate | None) -> dict[str, Any] | None:
            return None if c is None else c.to_json_dict()

        listed = self._listed(max_candidates)
        out = {
            "admitted": self.admitted,
            "reasons": [str(r) for r in self.reasons],
            "objective": self.objective.value,
            "recommended": as_json(self.recommended),
            "recommended_by_objective": {
                o.value: as_json(self.recommended_by_objective.get(o)) for o in Objective
            },
            "candidates": [c.to_json_dict() for c in listed],
        }
        if len(listed) < len(self.candidates):
            kept = {id(c) for c in listed}
            by_reason: dict[str, int] = {}
            for c in self.candidates:
                if id(c) not in kept:
                    code = c.reasons[0].code if c.reasons else "usable"
                    by_reason[code] = by_reason.get(code, 0) + 1
            out["candidates_total"] = len(self.candidates)
            out["candidates_left_out"] = dict(sorted(by_reason.items()))
        return out

    def _listed(self, limit: int | None) -> list[Candidate]:
        if limit is None or len(self.candidates) <= limit:
            return list(self.candidates)
        recommended = {
            id(c) for c in (self.recommended, *self.recommended_by_objective.values()) if c
        }
        ranked = sorted(
            range(len(self.candidates)),
            key=lambda i: (
                id(self.candidates[i]) not in recommended,
                not self.candidates[i].usable,
                i,
            ),
        )
        return [self.candidates[i] for i in sorted(ranked[:limit])]

    def candidate(self, layout: Layout) -> Candidate:
        """The candidate for `layout` (KeyError when it was not considered)."""
        for c in self.candidates:
            if c.layout == layout:
                return c
        raise KeyError(str(layout))


def admit(
    spec: ModelSpec,
    weights: WeightSize | None,
    inventory: ClusterInventory,
    request: AdmissionRequest,
    *,
    freed: Mapping[str, int] | None = None,
) -> Decision:
    """Decide whether and how `spec` can run on `inventory`.

    `weights` is the measured size (None: estimate from the config; the request's override
    wins over both). `freed` counts GPUs per node that an outgoing model will release.
    """
    if freed:
        inventory = inventory.with_freed(freed)
    if request.weights_override_bytes is not None:
        weights = override_weights(spec, request.weights_override_bytes)
    elif weights is None:
        weights = estimate_weights(spec)
    shape = model_bytes(spec).scaled_to(weights)
    if request.language_model_only:
        shape = replace(shape, extra=0)
    max_len = request.max_model_len or spec.max_context

    candidates: list[Candidate] = []
    for gpu, nodes in inventory.pools():
        layouts = (
            [request.layout]
            if request.layout is not None
            else list(_layouts(spec, nodes, request.dcp))
        )
        placer = Placer(
            nodes, weights_bytes=weights.total_bytes, cached_on=request.weights_cached_on
        )
        # Once per pool, not per candidate: a pool can have hundreds of nodes.
        gpus_per_node = max(n.gpus for n in nodes)
        # The engine settings depend on the layout only through its world size (TP x PP).
        settings_by_world: dict[int, EngineSettings] = {}
        for layout in layouts:
            settings = settings_by_world.get(layout.gpus_per_replica)
            if settings is None:
                settings = _engine_settings(request, gpu, layout)
                settings_by_world[layout.gpus_per_replica] = settings
            candidates.append(
                _judge(
                    spec,
                    shape,
                    layout,
                    gpu,
                    gpus_per_node,
                    placer,
                    request,
                    max_len,
                    settings,
                )
            )
    best = {o: _best(candidates, o) for o in Objective}
    candidates.sort(key=RANKINGS[request.objective])
    recommended = best[request.objective]

    reasons: list[Reason] = []
    if max_len > spec.max_context:
        reasons.append(
            Reason(
                ReasonCode.MAX_MODEL_LEN_EXCEEDS_CONTEXT,
                f"max_model_len {max_len} exceeds the model's context of {spec.max_context} "
                "tokens (max_position_embeddings).",
            )
        )
    if recommended is None:
        reasons.extend(_summary(candidates))
    admitted = recommended is not None and not reasons
    return Decision(
        admitted=admitted,
        reasons=tuple(reasons),
        recommended=recommended if admitted else None,
        candidates=tuple(candidates),
        weights=weights,
        max_model_len=max_len,
        objective=request.objective,
        recommended_by_objective={o: (c if admitted else None) for o, c in best.items()},
    )


def _engine_settings(request: AdmissionRequest, gpu: GpuProfile, layout: Layout) -> EngineSettings:
    """The request's batch limits, or vLLM's defaults for this GPU (`get_batch_defaults` sees
    one engine's world size: TP x PP)."""
    defaults = batch_defaults(gpu, world_size=layout.gpus_per_replica)
    return EngineSettings(
        max_num_batched_tokens=request.max_num_batched_tokens or defaults.max_num_batched_tokens,
        max_num_seqs=request.max_num_seqs or defaults.max_num_seqs,
        enforce_eager=request.enforce_eager,
        cuda_graphs_subtracted=request.vllm.cuda_graphs_subtracted,
        constants=request.constants,
        full_cuda_graphs=(
            request.vllm.full_cuda_graphs
            if request.full_cuda_graphs is None
            else request.full_cuda_graphs
        ),
        capture_grid_2025=request.vllm.capture_grid_2025,
        init_communicators_subtracted=request.vllm.init_communicators_subtracted,
        sampler=request.vllm.sampler,
    )


def _judge(
    spec: ModelSpec,
    shape: ModelBytes,
    layout: Layout,
    gpu: GpuProfile,
    gpus_per_node: int,
    placer: Placer,
    request: AdmissionRequest,
    max_len: int,
    settings: EngineSettings,
) -> Candidate:
    rule_reasons = list(check_model_rules(spec, layout))
    for device_rule in (
        tensor_parallel_within_node(layout, gpus_per_node, gpu.interconnect),
        decode_context_parallel_backend(layout, gpu),
    ):
        if device_rule is not None:
            rule_reasons.append(device_rule)
    valid = not rule_reasons

    fit_reasons: list[Reason] = []
    placement, place_reasons = placer.place(layout)
    fit_reasons.extend(place_reasons)
    memory = estimate_memory(
        spec,
        shape,
        layout,
        gpu,
        gpu_memory_utilization=request.gpu_memory_utilization,
        kv_cache_dtype=request.kv_cache_dtype,
        max_model_len=max_len,
        settings=settings,
        kv_cache_memory_bytes=request.kv_cache_memory_bytes,
    )
    kv_source = KvSource.MODEL
    observed = request.observed_kv
    if observed is not None and observed.layout == layout and memory.weights_fit:
        memory = with_observed_kv(memory, spec, layout, observed.kv_cache_tokens)
        kv_source = KvSource.OBSERVED
    headroom = gpu.memory_bytes - memory.budget_bytes
    if headroom < cuda_context_bytes(gpu):
        fit_reasons.append(
            Reason(
                ReasonCode.GPU_MEMORY_UTILIZATION_TOO_HIGH,
                f"gpu_memory_utilization {request.gpu_memory_utilization} leaves "
                f"{gib(headroom):.2f} GiB of {gpu.name} outside the budget, less than the "
                f"~{gib(cuda_context_bytes(gpu)):.1f} GiB CUDA context and communicators "
                "take before vLLM's start-up check; lower it.",
            )
        )
    if not memory.weights_fit:
        fit_reasons.append(
            Reason(
                ReasonCode.WEIGHTS_EXCEED_MEMORY,
                f"{gib(memory.weights_bytes_per_gpu):.1f} GiB of weights + "
                f"{gib(memory.overhead_bytes):.1f} GiB engine overhead (activations, CUDA "
                "graphs, buffers) per GPU exceed the "
                f"{gib(memory.budget_bytes):.1f} GiB budget ({gpu.name}, "
                f"gpu_memory_utilization {request.gpu_memory_utilization}).",
            )
        )
    elif not memory.full_request_fits:
        fit = memory.max_model_len_fit
        hint = f"; max_model_len {fit} would fit" if fit > 0 else "; no request length fits"
        fit_reasons.append(
            Reason(
                ReasonCode.KV_CACHE_TOO_SMALL,
                f"one request of {max_len} tokens needs "
                f"{gib(memory.request_kv_bytes):.2f} GiB of KV cache per "
                f"GPU but {gib(memory.kv_cache_bytes):.2f} GiB is left after weights and "
                f"overhead ({memory.kv_cache_tokens} tokens){hint}.",
            )
        )
    cost = decode_cost(
        spec,
        shape,
        layout,
        gpu,
        kv_cache_dtype=request.kv_cache_dtype,
        gpus_per_node=gpus_per_node,
    )
    at_load = throughput(
        spec,
        shape,
        layout,
        gpu,
        kv_cache_dtype=request.kv_cache_dtype,
        gpus_per_node=gpus_per_node,
        kv_cache_tokens=memory.kv_cache_tokens,
        max_num_seqs=settings.max_num_seqs,
    )
    deploy_reason = _not_deployable(layout, gpu)
    return Candidate(
        layout=layout,
        gpu=gpu.name,
        valid=valid,
        fits=not fit_reasons,
        reasons=tuple(rule_reasons + fit_reasons + ([deploy_reason] if deploy_reason else [])),
        weights_bytes_per_gpu=memory.weights_bytes_per_gpu,
        kv_bytes_per_token_per_gpu=memory.kv_bytes_per_token_per_gpu,
        kv_cache_tokens=memory.kv_cache_tokens,
        max_concurrency=memory.max_concurrency,
        max_model_len_fit=memory.max_model_len_fit,
        decode_tok_s_ceiling=cost.tokens_per_second,
        nodes=placement.nodes if placement is not None else (),
        groups=placement.groups if placement is not None else (),
        deployable=deploy_reason is None,
        memory_breakdown=memory.breakdown,
        kv_cache_bytes=memory.kv_cache_bytes,
        throughput_tok_s_ceiling=at_load.tokens_per_second,
        saturation_concurrency=at_load.saturation_concurrency,
        kv_source=kv_source,
    )


def _not_deployable(layout: Layout, gpu: GpuProfile) -> Reason | None:
    """What vLLM accepts but Switchyard's deployer does not run (yet)."""
    if layout.dp > 1:
        return Reason(
            ReasonCode.NOT_DEPLOYABLE,
            f"data parallel {layout.dp} is one vLLM engine group over {layout.total_gpus} GPUs; "
            "Switchyard deploys independent engines only (use replicas for copies).",
        )
    if layout.ep and gpu.interconnect is Interconnect.HOST_MEMORY:
        return Reason(
            ReasonCode.NOT_DEPLOYABLE,
            "expert parallel on vLLM's CPU engine crashes a worker; use ep=false on the CPU.",
        )
    return None


def _layouts(
    spec: ModelSpec, nodes: tuple[NodeInventory, ...], dcp: int | None
) -> Iterator[Layout]:
    """Powers of two for TP, PP and DP (plus a whole node's GPU count for TP), up to the
    pool's GPUs; expert parallel where there are experts and more than one MoE rank; DCP
    sizes (powers of two up to TP) for MLA, and for GQA where TP exceeds the KV heads. With
    `dcp` given, only that size (on every TP it could divide). No TP beyond the attention
    heads: vLLM refuses every one (heads % TP), and on a large cluster they were most of
    the candidates (TP 64 to 4,096 on 512 nodes of 8)."""
    total = sum(n.gpus for n in nodes)
    per_node = max(n.gpus for n in nodes)
    tps = sorted({*_powers_of_two(total), per_node} - {0})
    tps = [t for t in tps if t <= min(total, spec.attention.num_heads)]
    for tp in tps:
        for dcp_size in _dcp_sizes(spec, tp, dcp):
            for pp in _powers_of_two(min(total // tp, spec.num_layers)):
                for dp in _powers_of_two(total // (tp * pp)):
                    yield Layout(tp=tp, pp=pp, dp=dp, dcp=dcp_size)
                    if spec.moe is not None and tp * dp > 1:
                        yield Layout(tp=tp, pp=pp, dp=dp, ep=True, dcp=dcp_size)


def _dcp_sizes(spec: ModelSpec, tp: int, dcp: int | None) -> list[int]:
    if dcp is not None:
        return [dcp] if dcp <= tp else []
    att = spec.attention
    if att.mla is None and tp <= att.num_kv_heads:
        return [1]
    return _powers_of_two(tp)


def _powers_of_two(limit: int) -> list[int]:
    values = []
    value = 1
    while value <= limit:
        values.append(value)
        value *= 2
    return values


def _latency_rank(c: Candidate) -> tuple[bool, bool, float, int, float, int, int]:
    return (
        not c.usable,
        not c.valid,
        -c.decode_tok_s_ceiling,
        c.layout.total_gpus,
        -c.max_concurrency,
        c.layout.tp,
        c.layout.dcp,
    )


def _throughput_rank(c: Candidate) -> tuple[bool, bool, int, float, bool, float, int]:
    # Three significant figures: layouts the ceiling cannot tell apart fall to the tie-breaks.
    sustained = float(f"{c.throughput_tok_s_ceiling:.3g}")
    return (
        not c.usable,
        not c.valid,
        c.layout.total_gpus,
        -sustained,
        not c.layout.ep,
        -c.decode_tok_s_ceiling,
        c.layout.tp,
    )


RANKINGS = {Objective.LATENCY: _latency_rank, Objective.THROUGHPUT: _throughput_rank}
"""The order of candidates for each objective (best first)."""


def _best(candidates: list[Candidate], objective: Objective) -> Candidate | None:
    usable = [c for c in candidates if c.usable]
    return min(usable, key=RANKINGS[objective]) if usable else None


def _summary(candidates: list[Candidate]) -> list[Reason]:
    """Why nothing was recommended: one line per distinct code, from the closest candidate."""
    if not candidates:
        return [Reason(ReasonCode.NO_VALID_LAYOUT, "no layout was considered.")]
    valid = [c for c in candidates if c.valid]
    pool = valid or candidates
    head = (
        Reason(
            ReasonCode.NO_FITTING_LAYOUT,
            f"{len(valid)} of {len(candidates)} layouts pass vLLM's layout rules but none "
            "fits; the closest layouts fail for the reasons below.",
        )
        if valid
        else Reason(
            ReasonCode.NO_VALID_LAYOUT,
            f"none of {len(candidates)} layouts passes vLLM's layout rules.",
        )
    )
    # The closest layouts are those with the fewest reasons; report their distinct reasons.
    fewest = min(len(c.reasons) for c in pool)
    seen: dict[str, Reason] = {}
    for c in pool:
        if len(c.reasons) != fewest:
            continue
        for r in c.reasons:
            seen.setdefault(r.code, Reason(r.code, f"{c.layout}: {r.message}"))
    return [head, *seen.values()]
