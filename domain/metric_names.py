"""Every metric Switchyard emits or charts, in one place.

Emitters (the gateway, the fleet manager) create their instruments from these specs, and the
dashboard generator builds every PromQL expression from them, so a renamed metric changes
both sides at once and can never leave a panel empty.

Ray's metrics pipeline exports a `ray.util.metrics` metric named `x` as `ray_x` (with
`_total` for counters, `_bucket`/`_sum`/`_count` for histograms); `exported()` spells that.
vLLM's engine metrics reach Prometheus through the same pipeline (Ray Serve LLM's
`log_engine_metrics`), with the `:` of `vllm:x` replaced by `_`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

SD_FILE_NAME = "prom_metrics_service_discovery.json"
RAY_SD_FILE = f"/tmp/ray/{SD_FILE_NAME}"
"""Where Ray lists every node's metrics agent for Prometheus: its link to the newest
session's file."""


class Kind(StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


RAY_PREFIX = "ray_"

# Seconds. From a few ms (a token on a GPU) to minutes (a long prompt queued behind others):
# LLM latencies span five orders of magnitude, so the buckets are roughly logarithmic.
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
)
# Inter-token gaps are short; finer at the low end where decode speed lives.
INTER_TOKEN_BUCKETS_S: tuple[float, ...] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.15,
    0.2,
    0.3,
    0.5,
    1.0,
    2.5,
    5.0,
)
# Swap phases: staging and engine start take minutes on real models.
OPERATION_BUCKETS_S: tuple[float, ...] = (
    0.1,
    0.5,
    1.0,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1200.0,
    1800.0,
    3600.0,
)


@dataclass(frozen=True)
class MetricSpec:
    name: str
    """The name given to `ray.util.metrics` (or, for engine metrics, vLLM's sanitised name)."""
    kind: Kind
    labels: tuple[str, ...]
    description: str
    buckets: tuple[float, ...] = ()

    @property
    def exported(self) -> str:
        """The series name Prometheus stores (histograms: the base of _bucket/_sum/_count)."""
        base = RAY_PREFIX + self.name
        return base + "_total" if self.kind is Kind.COUNTER else base

    def series(self, suffix: str) -> str:
        """A histogram's `_bucket`, `_sum` or `_count` series."""
        assert self.kind is Kind.HISTOGRAM, self.name
        assert suffix in ("_bucket", "_sum", "_count"), suffix
        return self.exported + suffix


# ---------------------------------------------------------------- gateway (per replica)
GATEWAY_REQUESTS = MetricSpec(
    "switchyard_gateway_requests",
    Kind.COUNTER,
    ("model", "alias", "outcome", "status_code"),
    "Requests answered by the gateway, by model, requested alias, outcome and HTTP status.",
)
GATEWAY_PROMPT_TOKENS = MetricSpec(
    "switchyard_gateway_prompt_tokens",
    Kind.COUNTER,
    ("model",),
    "Prompt tokens of answered requests (from the engine's usage report).",
)
GATEWAY_GENERATED_TOKENS = MetricSpec(
    "switchyard_gateway_generated_tokens",
    Kind.COUNTER,
    ("model",),
    "Generated tokens of answered requests (from the engine's usage report).",
)
# Per tenant: `key` is the tenant's name from the keys file, never the key.
KEY_REQUESTS = MetricSpec(
    "switchyard_key_requests",
    Kind.COUNTER,
    ("key", "outcome"),
    "Requests answered for a tenant key, by the key's name and outcome.",
)
KEY_PROMPT_TOKENS = MetricSpec(
    "switchyard_key_prompt_tokens",
    Kind.COUNTER,
    ("key",),
    "Prompt tokens of a tenant key's answered requests (from the engine's usage report).",
)
KEY_GENERATED_TOKENS = MetricSpec(
    "switchyard_key_generated_tokens",
    Kind.COUNTER,
    ("key",),
    "Generated tokens of a tenant key's answered requests (from the engine's usage report).",
)
KEY_REJECTIONS = MetricSpec(
    "switchyard_key_rejections",
    Kind.COUNTER,
    ("key", "reason"),
    "Requests refused for a tenant key, by reason: invalid_key (key name `-`), "
    "model_not_allowed, requests_per_minute, tokens_per_minute.",
)
GATEWAY_TTFT = MetricSpec(
    "switchyard_gateway_time_to_first_token_seconds",
    Kind.HISTOGRAM,
    ("model",),
    "Streaming requests: from the request's arrival at the gateway to its first token.",
    LATENCY_BUCKETS_S,
)
GATEWAY_ITL = MetricSpec(
    "switchyard_gateway_inter_token_latency_seconds",
    Kind.HISTOGRAM,
    ("model",),
    "Streaming requests: the gap between consecutive chunks the gateway relays (one token each,"
    " unless the engine's events arrive together under load).",
    INTER_TOKEN_BUCKETS_S,
)
GATEWAY_E2E = MetricSpec(
    "switchyard_gateway_request_seconds",
    Kind.HISTOGRAM,
    ("model", "outcome"),
    "From the request's arrival at the gateway to its last byte (hold time included).",
    LATENCY_BUCKETS_S,
)
GATEWAY_IN_FLIGHT = MetricSpec(
    "switchyard_gateway_in_flight_requests",
    Kind.GAUGE,
    ("model",),
    "Requests forwarded to a model and not finished yet, per gateway replica.",
)
GATEWAY_HELD = MetricSpec(
    "switchyard_gateway_held_requests",
    Kind.GAUGE,
    ("alias",),
    "Requests waiting now for an alias a swap is moving, or for a parked model's wake, per "
    "gateway replica.",
)
GATEWAY_HOLD = MetricSpec(
    "switchyard_gateway_hold_seconds",
    Kind.HISTOGRAM,
    ("alias", "outcome", "cause"),
    "How long held requests waited (outcome: released, timeout, queue_full, too_long, "
    "wake_ended; cause: swap or wake).",
    LATENCY_BUCKETS_S,
)

# ---------------------------------------------------------------- fleet manager (head node)
MODEL_STATE = MetricSpec(
    "switchyard_model_state",
    Kind.GAUGE,
    ("model", "state"),
    "1 for the state a model is in, 0 for the others (one series per state).",
)
ALIAS_TARGET = MetricSpec(
    "switchyard_alias_target",
    Kind.GAUGE,
    ("alias", "model"),
    "1 for the model an alias points at.",
)
OPERATIONS = MetricSpec(
    "switchyard_manager_operations",
    Kind.COUNTER,
    ("kind", "outcome"),
    "Fleet operations (add, swap, remove, alias, park, wake, residency) by outcome (done, "
    "rejected, rolled_back, failed).",
)
OPERATION_SECONDS = MetricSpec(
    "switchyard_manager_operation_seconds",
    Kind.HISTOGRAM,
    ("kind", "outcome"),
    "Duration of whole fleet operations.",
    OPERATION_BUCKETS_S,
)
PHASE_SECONDS = MetricSpec(
    "switchyard_manager_phase_seconds",
    Kind.HISTOGRAM,
    ("kind", "phase"),
    "Duration of each phase of fleet operations (preflight, draining, removing_old, ...).",
    OPERATION_BUCKETS_S,
)
STARTUP_STEP_SECONDS = MetricSpec(
    "switchyard_manager_startup_step_seconds",
    Kind.HISTOGRAM,
    ("step",),
    "Where each deployment's start went: scheduling, replica_process, engine_start, "
    "weight_load, kv_cache, compile, replica_ready, warm_up (a step the reports do not show "
    "is not observed).",
    OPERATION_BUCKETS_S,
)
WAKES = MetricSpec(
    "switchyard_manager_wakes",
    Kind.COUNTER,
    ("model", "park_mode", "trigger", "outcome"),
    "Wakes of parked models (trigger: request or manual; outcome: done, rejected, failed).",
)
WAKE_SECONDS = MetricSpec(
    "switchyard_manager_wake_seconds",
    Kind.HISTOGRAM,
    ("model", "park_mode"),
    "How long a wake that served took, admission to warmed (its start-up steps are in "
    "switchyard_manager_startup_step_seconds).",
    OPERATION_BUCKETS_S,
)
WAKE_PREDICTED_SECONDS = MetricSpec(
    "switchyard_manager_wake_predicted_seconds",
    Kind.GAUGE,
    ("model", "path"),
    "What a model's latest wake was predicted to take, per path: level_1 and level_2 (from "
    "the bytes they move and their links, corrected by its past wakes) or cold_start (its "
    "last start).",
)
WAKE_MEASURED_SECONDS = MetricSpec(
    "switchyard_manager_wake_measured_seconds",
    Kind.GAUGE,
    ("model", "path"),
    "What that wake took, wake asked to warmed: beside the prediction.",
)
PARKS = MetricSpec(
    "switchyard_manager_parks",
    Kind.COUNTER,
    ("model", "reason"),
    "Models parked (reason: idle, evicted to make room for a wake, manual).",
)
LAST_SWAP_PHASE_SECONDS = MetricSpec(
    "switchyard_manager_last_swap_phase_seconds",
    Kind.GAUGE,
    ("old", "new", "strategy", "phase"),
    "Exact phase durations of the latest swap (kept until the next swap).",
)
LAST_SWAP_ALIAS_UNAVAILABLE_SECONDS = MetricSpec(
    "switchyard_manager_last_swap_alias_unavailable_seconds",
    Kind.GAUGE,
    ("alias", "old", "new", "strategy"),
    "How long each alias of the latest swap had no model serving it (held from the drain "
    "to the switch; 0 for make-before-break); kept until the next swap.",
)
SWAP_IN_PROGRESS = MetricSpec(
    "switchyard_manager_swap_in_progress",
    Kind.GAUGE,
    ("old", "new", "strategy", "phase"),
    "1 while a swap from old to new is in this phase, else 0 (the dashboards' annotations); "
    "strategy is the one asked for (auto) until preflight resolves it.",
)
ADMISSION_DECISIONS = MetricSpec(
    "switchyard_manager_admission_decisions",
    Kind.COUNTER,
    ("result", "reason"),
    "Admission decisions (admitted / rejected) by reason code (`none` when admitted).",
)
NODE_STAGINGS = MetricSpec(
    "switchyard_manager_node_stagings",
    Kind.COUNTER,
    ("node", "outcome"),
    "Weights staged per node for an operation: downloaded, reused (already there), shared "
    "(another node staged the cache this node sees).",
)
NODE_STAGED_DOWNLOAD_BYTES = MetricSpec(
    "switchyard_manager_node_last_download_bytes",
    Kind.GAUGE,
    ("node",),
    "Bytes of weights the latest staging downloaded onto each node's cache (0 when the node "
    "had them already or shares another node's cache).",
)
ACCELERATORS_TOTAL = MetricSpec(
    "switchyard_node_accelerators",
    Kind.GAUGE,
    ("node",),
    "Accelerator slots (GPUs, or CPU stand-in slots) a node has.",
)
ACCELERATORS_CLAIMED = MetricSpec(
    "switchyard_node_accelerators_claimed",
    Kind.GAUGE,
    ("node",),
    "Accelerator slots of a node claimed by placement groups.",
)
STAGED_BYTES = MetricSpec(
    "switchyard_node_staged_bytes",
    Kind.GAUGE,
    ("node",),
    "Bytes of model weights in the staging cache (measured on the manager's node).",
)
DISK_FREE_BYTES = MetricSpec(
    "switchyard_node_disk_free_bytes",
    Kind.GAUGE,
    ("node",),
    "Free bytes on the staging cache's filesystem (measured on the manager's node).",
)
KV_PREDICTION_RATIO = MetricSpec(
    "switchyard_manager_kv_prediction_ratio",
    Kind.GAUGE,
    ("model",),
    "Observed over predicted KV cache tokens of each served model: what its engine logged at "
    "start-up over what admission predicted for its deployment (1.0: the memory model was "
    "exact; absent while the engine logged no KV size).",
)

GATEWAY_METRICS: tuple[MetricSpec, ...] = (
    GATEWAY_REQUESTS,
    GATEWAY_PROMPT_TOKENS,
    GATEWAY_GENERATED_TOKENS,
    GATEWAY_TTFT,
    GATEWAY_ITL,
    GATEWAY_E2E,
    GATEWAY_IN_FLIGHT,
    GATEWAY_HELD,
    GATEWAY_HOLD,
    KEY_REQUESTS,
    KEY_PROMPT_TOKENS,
    KEY_GENERATED_TOKENS,
    KEY_REJECTIONS,
)
MANAGER_METRICS: tuple[MetricSpec, ...] = (
    MODEL_STATE,
    ALIAS_TARGET,
    OPERATIONS,
    OPERATION_SECONDS,
    PHASE_SECONDS,
    STARTUP_STEP_SECONDS,
    WAKES,
    WAKE_SECONDS,
    WAKE_PREDICTED_SECONDS,
    WAKE_MEASURED_SECONDS,
    PARKS,
    LAST_SWAP_PHASE_SECONDS,
    LAST_SWAP_ALIAS_UNAVAILABLE_SECONDS,
    SWAP_IN_PROGRESS,
    ADMISSION_DECISIONS,
    NODE_STAGINGS,
    NODE_STAGED_DOWNLOAD_BYTES,
    ACCELERATORS_TOTAL,
    ACCELERATORS_CLAIMED,
    STAGED_BYTES,
    KV_PREDICTION_RATIO,
    DISK_FREE_BYTES,
)

# ---------------------------------------------------------------- vLLM engines (not ours)
# Emitted by vLLM inside each model replica and exported by Ray Serve LLM; `model_name` is
# the served model name. Only the ones the dashboards chart are listed.
ENGINE_RUNNING = MetricSpec(
    "vllm_num_requests_running", Kind.GAUGE, ("model_name",), "Requests the engine runs now."
)
ENGINE_WAITING = MetricSpec(
    "vllm_num_requests_waiting", Kind.GAUGE, ("model_name",), "Requests queued in the engine."
)
ENGINE_KV_USAGE = MetricSpec(
    "vllm_kv_cache_usage_perc",
    Kind.GAUGE,
    ("model_name",),
    "Fraction of the KV cache in use (0 to 1).",
)
ENGINE_PREFIX_QUERIES = MetricSpec(
    "vllm_prefix_cache_queries",
    Kind.COUNTER,
    ("model_name",),
    "Prompt tokens looked up in the prefix cache.",
)
ENGINE_PREFIX_HITS = MetricSpec(
    "vllm_prefix_cache_hits", Kind.COUNTER, ("model_name",), "Prompt tokens found there."
)
ENGINE_METRICS: tuple[MetricSpec, ...] = (
    ENGINE_RUNNING,
    ENGINE_WAITING,
    ENGINE_KV_USAGE,
    ENGINE_PREFIX_QUERIES,
    ENGINE_PREFIX_HITS,
)

ALL_METRICS: tuple[MetricSpec, ...] = GATEWAY_METRICS + MANAGER_METRICS + ENGINE_METRICS
