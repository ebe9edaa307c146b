"""The admission decision: which layouts vLLM would accept, which fit, which to use, and why not.

`admit` enumerates candidate layouts on each GPU kind of the inventory (or judges the one
layout asked for), applies the layout rules, places the TP groups on free GPUs, checks disk,
estimates memory and the decode ceiling, and ranks what fits:

1. valid and fitting layouts first;
2. then by the single-stream decode ceiling (higher first; see `policies.cost_model`),
   which prefers less all-reduce traffic on PCIe-only nodes;
3. then by fewer GPUs (leaving room for other models), then more KV concurrency.

The recommended layout is the first of that order when it is valid and fits.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from policies.cost_model import decode_cost
from policies.errors import InvalidRequest
from policies.inventory import ClusterInventory, GpuProfile, NodeInventory
from policies.layout import Layout
from policies.layout_rules import check_model_rules, tensor_parallel_within_node
from policies.memory import KvCacheDtype, OverheadSettings, estimate_memory
from policies.model_spec import ModelSpec
from policies.parameters import ModelBytes, model_bytes
from policies.placement import place
from policies.reasons import Reason, ReasonCode
from policies.units import gib
from policies.weights import WeightSize, estimate_weights, override_weights


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
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    weights_cached_on: frozenset[str] = field(default_factory=frozenset)
    """Storage ids (`NodeInventory.storage_id`) that already hold the weights."""

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
        if self.max_num_batched_tokens < 1 or self.max_num_seqs < 1:
            raise InvalidRequest("max_num_batched_tokens and max_num_seqs must be >= 1")


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

    @property
    def usable(self) -> bool:
        return self.valid and self.fits

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "tp": self.layout.tp,
            "pp": self.layout.pp,
            "dp": self.layout.dp,
            "ep": self.layout.ep,
            "valid": self.valid,
            "fits": self.fits,
            "reasons": [str(r) for r in self.reasons],
            "weights_gib_per_gpu": round(gib(self.weights_bytes_per_gpu), 2),
            "kv_bytes_per_token_per_gpu": self.kv_bytes_per_token_per_gpu,
            "kv_cache_tokens": self.kv_cache_tokens,
            "max_concurrency": round(self.max_concurrency, 2),
            "decode_tok_s_ceiling": round(self.decode_tok_s_ceiling, 1),
        }


@dataclass(frozen=True)
class Decision:
    admitted: bool
    reasons: tuple[Reason, ...]
    recommended: Candidate | None
    candidates: tuple[Candidate, ...]
    weights: WeightSize
    max_model_len: int

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "admitted": self.admitted,
            "reasons": [str(r) for r in self.reasons],
            "recommended": None if self.recommended is None else self.recommended.to_json_dict(),
            "candidates": [c.to_json_dict() for c in self.candidates],
        }

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
    max_len = request.max_model_len or spec.max_context
    settings = OverheadSettings(request.max_num_batched_tokens, request.max_num_seqs)

    candidates: list[Candidate] = []
    for gpu, nodes in inventory.pools():
        layouts = (
            [request.layout] if request.layout is not None else list(_layouts(spec, nodes, gpu))
        )
        for layout in layouts:
            candidates.append(
                _judge(spec, shape, weights, layout, gpu, nodes, request, max_len, settings)
            )
    candidates.sort(key=_rank)
    recommended = candidates[0] if candidates and candidates[0].usable else None

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
    )


def _judge(
    spec: ModelSpec,
    shape: ModelBytes,
    weights: WeightSize,
    layout: Layout,
    gpu: GpuProfile,
    nodes: tuple[NodeInventory, ...],
    request: AdmissionRequest,
    max_len: int,
    settings: OverheadSettings,
) -> Candidate:
    gpus_per_node = max(n.gpus for n in nodes)
    rule_reasons = list(check_model_rules(spec, layout))
    cross = tensor_parallel_within_node(layout, gpus_per_node, gpu.interconnect)
    if cross is not None:
        rule_reasons.append(cross)
    valid = not rule_reasons

    fit_reasons: list[Reason] = []
    placement, place_reasons = place(
        layout, nodes, weights_bytes=weights.total_bytes, cached_on=request.weights_cached_on
    )
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
    )
    if not memory.weights_fit:
        fit_reasons.append(
            Reason(
                ReasonCode.WEIGHTS_EXCEED_MEMORY,
                f"{gib(memory.weights_bytes_per_gpu):.1f} GiB of weights + "
                f"{gib(memory.overhead_bytes):.1f} GiB runtime overhead per GPU exceed the "
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
    return Candidate(
        layout=layout,
        gpu=gpu.name,
        valid=valid,
        fits=not fit_reasons,
        reasons=tuple(rule_reasons + fit_reasons),
        weights_bytes_per_gpu=memory.weights_bytes_per_gpu,
        kv_bytes_per_token_per_gpu=memory.kv_bytes_per_token_per_gpu,
        kv_cache_tokens=memory.kv_cache_tokens,
        max_concurrency=memory.max_concurrency,
        max_model_len_fit=memory.max_model_len_fit,
        decode_tok_s_ceiling=cost.tokens_per_second,
        nodes=placement.nodes if placement is not None else (),
    )


def _layouts(
    spec: ModelSpec, nodes: tuple[NodeInventory, ...], gpu: GpuProfile
) -> Iterator[Layout]:
    """Powers of two for TP, PP and DP (plus a whole node's GPU count for TP), up to the
    pool's GPUs; expert parallel where there are experts and more than one MoE rank."""
    total = sum(n.gpus for n in nodes)
    per_node = max(n.gpus for n in nodes)
    tps = sorted({*_powers_of_two(total), per_node} - {0})
    tps = [t for t in tps if t <= total]
    for tp in tps:
        for pp in _powers_of_two(min(total // tp, spec.num_layers)):
            for dp in _powers_of_two(total // (tp * pp)):
                yield Layout(tp=tp, pp=pp, dp=dp)
                if spec.moe is not None and tp * dp > 1:
                    yield Layout(tp=tp, pp=pp, dp=dp, ep=True)


def _powers_of_two(limit: int) -> list[int]:
    values = []
    value = 1
    while value <= limit:
        values.append(value)
        value *= 2
    return values


def _rank(c: Candidate) -> tuple[bool, bool, float, int, float, int]:
    return (
        not c.usable,
        not c.valid,
        -c.decode_tok_s_ceiling,
        c.layout.total_gpus,
        -c.max_concurrency,
        c.layout.tp,
    )


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
