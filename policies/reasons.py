"""Why a layout or a model is refused: a stable code plus a sentence for humans.

Codes become a Prometheus label later, so the set is closed (`ReasonCode`) and each code is
short snake_case. Messages carry the numbers; codes never do.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ReasonCode(StrEnum):
    """Every reason the policy can give. Adding one is an API change for dashboards."""

    HEADS_NOT_DIVISIBLE = "heads_not_divisible"
    """Attention heads do not divide by TP (vLLM asserts this when building the model)."""
    KV_HEADS_NOT_DIVISIBLE = "kv_heads_not_divisible"
    """KV heads neither divide by TP nor divide TP, so they can be neither split nor replicated."""
    FP8_BLOCK_MISALIGNED = "fp8_block_misaligned"
    """A TP-split dimension of a block-FP8 weight is not a multiple of the quantization block."""
    TP_CROSS_NODE = "tp_cross_node"
    """A tensor-parallel group would span nodes whose GPUs only talk over PCIe."""
    PP_UNSUPPORTED = "pp_unsupported"
    """vLLM's model class for this architecture does not implement pipeline parallelism."""
    PP_EXCEEDS_LAYERS = "pp_exceeds_layers"
    """More pipeline stages than decoder layers: some stage would be empty."""
    EP_NEEDS_EXPERTS = "ep_needs_experts"
    """Expert parallelism was asked for a model without routed experts."""
    DCP_INVALID = "dcp_invalid"
    """The decode-context-parallel size breaks one of vLLM's rules (tp % dcp, and for GQA the
    KV-head replicas it shards over)."""
    DCP_BACKEND_UNSUPPORTED = "dcp_backend_unsupported"
    """The device's attention backend returns no log-sum-exp for decode, which DCP needs."""
    NOT_DEPLOYABLE = "not_deployable"
    """vLLM accepts the layout but Switchyard's deployer does not run it yet: data parallel
    (one engine group over DP ranks; independent copies are `replicas`), or expert parallel
    on the CPU engine."""
    GPU_MEMORY_UTILIZATION_TOO_HIGH = "gpu_memory_utilization_too_high"
    """`1 - gpu_memory_utilization` of the GPU cannot hold the CUDA context, so vLLM refuses
    to start (free memory at start-up below the requested budget)."""
    NOT_ENOUGH_GPUS = "not_enough_gpus"
    """The free GPUs cannot host the layout's TP groups."""
    WEIGHTS_EXCEED_MEMORY = "weights_exceed_memory"
    """Weights plus runtime overhead leave no room for a KV cache on some GPU."""
    KV_CACHE_TOO_SMALL = "kv_cache_too_small"
    """The KV cache cannot hold one request of `max_model_len` tokens (vLLM refuses to start)."""
    DISK_INSUFFICIENT = "disk_insufficient"
    """A node that would host the model has too little free disk for its weights."""
    MAX_MODEL_LEN_EXCEEDS_CONTEXT = "max_model_len_exceeds_context"
    """The requested `max_model_len` is longer than the model's own context window."""
    TRUST_REMOTE_CODE_REQUIRED = "trust_remote_code_required"
    """The architecture's checkpoints ship code vLLM must run and the operator has not set
    `trust_remote_code` (a recipe never sets it for them)."""
    SLEEP_MODE_UNAVAILABLE = "sleep_mode_unavailable"
    """`park_mode: sleep` on a platform whose vLLM has no sleep mode (the CPU engine raises
    when `enable_sleep_mode` is set)."""
    SLEEP_HOST_MEMORY = "sleep_host_memory"
    """A level-1 sleep would pin more weights in a node's host memory than it allows beside
    the models already asleep there."""
    NO_VALID_LAYOUT = "no_valid_layout"
    """Summary: no candidate layout passes vLLM's layout rules."""
    NO_FITTING_LAYOUT = "no_fitting_layout"
    """Summary: some layouts are valid, but none fits memory, GPUs and disk."""


@dataclass(frozen=True)
class Reason:
    """One refusal: `code` is a `ReasonCode` value, `message` says what and by how much."""

    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"
