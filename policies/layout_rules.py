"""vLLM's layout rules, one small named function each: `None` passes, a `Reason` refuses.

Each rule mirrors a check vLLM makes while building the model (sources cited per rule),
so a layout that passes here is not refused by vLLM for its shape. Memory, GPU count and
disk are not rules of the layout; they are judged in `policies.memory` and
`policies.placement`.
"""

from __future__ import annotations

from collections.abc import Callable

from policies.checkpoint.model_spec import ModelSpec
from policies.checkpoint.module_groups import ModuleGroup
from policies.inventory import GpuProfile, Interconnect
from policies.layout import Layout
from policies.reasons import Reason, ReasonCode

ModelRule = Callable[[ModelSpec, Layout], Reason | None]


def attention_heads_divide_by_tp(spec: ModelSpec, layout: Layout) -> Reason | None:
    """vllm/config/model.py verify_with_parallel_config: heads % TP == 0."""
    heads = spec.attention.num_heads
    if heads % layout.tp == 0:
        return None
    return Reason(
        ReasonCode.HEADS_NOT_DIVISIBLE,
        f"Total number of attention heads ({heads}) must be divisible by tensor parallel "
        f"size ({layout.tp}).",
    )


def kv_heads_split_or_replicate(spec: ModelSpec, layout: Layout) -> Reason | None:
    """QKVParallelLinear: KV heads split when kv % TP == 0, replicated when TP % kv == 0.

    MLA has one shared latent per token, so the rule does not apply to it.
    """
    if spec.attention.mla is not None:
        return None
    kv, tp = spec.attention.num_kv_heads, layout.tp
    if kv % tp == 0 or tp % kv == 0:
        return None
    return Reason(
        ReasonCode.KV_HEADS_NOT_DIVISIBLE,
        f"{kv} KV heads can be neither split over TP={tp} (kv % tp != 0) nor replicated "
        f"(tp % kv != 0).",
    )


def fp8_blocks_align(spec: ModelSpec, layout: Layout) -> Reason | None:
    """Block-FP8: every TP-split dimension of a quantized weight must be a block multiple.

    vllm/model_executor/layers/quantization/utils/fp8_utils.py: validate_fp8_block_shape
    (column-parallel outputs % block_n, row-parallel inputs % block_k) and
    validate_fp8_block_shape_moe (per-partition expert intermediate % block_n, and % block_k
    when TP > 1). Experts are cut TP x DP ways without expert parallel and not at all with it;
    shared experts and dense MLPs are always cut by TP.
    """
    quant = spec.quantization
    if not quant.is_block_fp8 or quant.block_size is None:
        return None
    block_n, block_k = quant.block_size
    tp = layout.tp
    att = spec.attention
    groups = quant.quantized_groups

    moe = spec.moe
    if moe is not None and ModuleGroup.ROUTED_EXPERTS in groups:
        split = layout.moe_split
        size = moe.expert_intermediate_size
        per_rank = size // split
        how = (
            "whole experts with expert parallel"
            if layout.ep
            else f"split {split} ways by TP{tp} x DP{layout.dp} without expert parallel"
        )
        if size % split != 0 or per_rank % block_n != 0:
            return Reason(
                ReasonCode.FP8_BLOCK_MISALIGNED,
                f"The output_size of gate's and up's weight = {size / split:g} is not divisible "
                f"by weight quantization block_n = {block_n} (routed experts: intermediate "
                f"size {size}, {how}).",
            )
        if split > 1 and per_rank % block_k != 0:
            return Reason(
                ReasonCode.FP8_BLOCK_MISALIGNED,
                f"The input_size of down's weight = {per_rank} is not divisible by weight "
                f"quantization block_k = {block_k} (routed experts, {how}).",
            )

    checks: list[tuple[str, int, int, str]] = []
    """(what, full size, block, out|in) for each TP-split dimension."""
    if ModuleGroup.ATTENTION in groups:
        if att.mla is not None:
            mla = att.mla
            heads = att.num_heads
            checks += [
                ("q_b_proj output", heads * att.head_dim, block_n, "out"),
                (
                    "kv_b_proj output",
                    heads * (mla.qk_nope_head_dim + mla.v_head_dim),
                    block_n,
                    "out",
                ),
                ("o_proj input", heads * mla.v_head_dim, block_k, "in"),
            ]
        else:
            checks += [
                ("q_proj output", att.num_heads * att.head_dim, block_n, "out"),
                ("o_proj input", att.num_heads * att.v_head_dim, block_k, "in"),
            ]
            if att.num_kv_heads % tp == 0:
                checks.append(("k/v_proj output", att.num_kv_heads * att.head_dim, block_n, "out"))
    if spec.num_dense_layers and ModuleGroup.DENSE_MLP in groups:
        checks += [
            ("dense MLP gate/up output", spec.dense_intermediate_size, block_n, "out"),
            ("dense MLP down input", spec.dense_intermediate_size, block_k, "in"),
        ]
    if moe is not None and moe.shared_intermediate_size and ModuleGroup.SHARED_EXPERT in groups:
        checks += [
            ("shared expert gate/up output", moe.shared_intermediate_size, block_n, "out"),
            ("shared expert down input", moe.shared_intermediate_size, block_k, "in"),
        ]
    if tp == 1:
        return None
    for what, size, block, direction in checks:
        if size % tp == 0 and (size // tp) % block == 0:
            continue
        share = size / tp
        if direction == "out":
            text = f"Weight output_partition_size = {share:g} is not divisible by"
            text += f" weight quantization block_n = {block}"
        else:
            text = f"Weight input_size_per_partition = {share:g} is not divisible by"
            text += f" weight quantization block_k = {block}"
        return Reason(ReasonCode.FP8_BLOCK_MISALIGNED, f"{text} ({what} {size} split by TP{tp}).")
    return None


def pipeline_parallel_supported(spec: ModelSpec, layout: Layout) -> Reason | None:
    """vllm/config/model.py: PP > 1 needs a model class implementing SupportsPP."""
    if layout.pp == 1 or spec.supports_pp:
        return None
    arch = spec.wrapper_architecture or spec.architecture
    return Reason(
        ReasonCode.PP_UNSUPPORTED,
        f"Pipeline parallelism is not supported for {arch} (no SupportsPP in vLLM).",
    )


def pipeline_stages_have_layers(spec: ModelSpec, layout: Layout) -> Reason | None:
    """vllm/distributed/utils.py get_pp_indices gives each stage layers // pp layers."""
    if layout.pp <= spec.num_layers:
        return None
    return Reason(
        ReasonCode.PP_EXCEEDS_LAYERS,
        f"PP={layout.pp} exceeds the model's {spec.num_layers} decoder layers.",
    )


def expert_parallel_needs_experts(spec: ModelSpec, layout: Layout) -> Reason | None:
    """vllm/config/model.py _verify_with_expert_parallelism: EP needs a MoE model."""
    if not layout.ep or spec.moe is not None:
        return None
    return Reason(
        ReasonCode.EP_NEEDS_EXPERTS,
        "Expert parallelism needs routed experts; this model is dense.",
    )


def decode_context_parallel_divides_tp(spec: ModelSpec, layout: Layout) -> Reason | None:
    """vllm/config/parallel.py: DCP reuses the TP ranks, so tp % dcp == 0."""
    if layout.dcp == 1 or layout.tp % layout.dcp == 0:
        return None
    return Reason(
        ReasonCode.DCP_INVALID,
        f"tp_size={layout.tp} must be divisible by dcp_size={layout.dcp}.",
    )


def decode_context_parallel_fits_kv_heads(spec: ModelSpec, layout: Layout) -> Reason | None:
    """vllm/config/model.py verify_with_parallel_config, for GQA/MQA (MLA is exempt): TP
    must exceed the KV heads, DCP may use only the replicas of each KV head
    (dcp <= tp // kv_heads), and the query heads per KV head must divide by DCP."""
    att = spec.attention
    if layout.dcp == 1 or att.mla is not None:
        return None
    kv, tp, dcp = att.num_kv_heads, layout.tp, layout.dcp
    if tp <= kv:
        text = (
            "Decode context parallelism for GQA/MQA requires `--tensor-parallel-size` "
            f"({tp}) to be greater than the model's total number of KV heads ({kv})."
        )
    elif dcp > tp // kv:
        text = (
            f"`--decode-context-parallel-size` ({dcp}) exceeds the maximum supported value "
            f"({tp // kv}) for `--tensor-parallel-size` ({tp}) and {kv} model KV heads."
        )
    elif (att.num_heads // kv) % dcp != 0:
        text = (
            f"The model's number of query heads per KV head ({att.num_heads // kv}) must be "
            f"divisible by `--decode-context-parallel-size` ({dcp}) for GQA/MQA."
        )
    else:
        return None
    return Reason(ReasonCode.DCP_INVALID, text)


MODEL_RULES: tuple[ModelRule, ...] = (
    attention_heads_divide_by_tp,
    kv_heads_split_or_replicate,
    fp8_blocks_align,
    pipeline_parallel_supported,
    pipeline_stages_have_layers,
    expert_parallel_needs_experts,
    decode_context_parallel_divides_tp,
    decode_context_parallel_fits_kv_heads,
)


def decode_context_parallel_backend(layout: Layout, gpu: GpuProfile) -> Reason | None:
    """vllm/v1/worker/cp_utils.py check_attention_cp_compatibility: DCP merges partial
    attention with the softmax log-sum-exp, which the device's attention backend must return
    for decode (`GpuProfile.decode_lse_attention`)."""
    if layout.dcp == 1 or gpu.decode_lse_attention:
        return None
    return Reason(
        ReasonCode.DCP_BACKEND_UNSUPPORTED,
        "Decode Context Parallelism (DCP) requires attention implementations to return the "
        f"softmax LSE during decode, but the attention backends on {gpu.name} do not.",
    )


def tensor_parallel_within_node(
    layout: Layout, gpus_per_node: int, interconnect: Interconnect
) -> Reason | None:
    """A TP group all-reduces twice per layer: across nodes over PCIe it is refused.

    NVLink nodes may span (e.g. a multi-node NVLink domain); the cost model charges it.
    """
    if layout.tp <= gpus_per_node or interconnect is Interconnect.NVLINK:
        return None
    return Reason(
        ReasonCode.TP_CROSS_NODE,
        f"TP={layout.tp} spans nodes of {gpus_per_node} GPUs that only have "
        f"{interconnect.value}; keep TP within a node and use PP or DP across nodes.",
    )


def check_model_rules(spec: ModelSpec, layout: Layout) -> tuple[Reason, ...]:
    return tuple(r for rule in MODEL_RULES if (r := rule(spec, layout)) is not None)
