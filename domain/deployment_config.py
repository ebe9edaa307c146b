"""The typed, user-facing description of one model deployment.

Validated before anything touches the cluster: a bad value fails here with the field's
name, the value and what is allowed, and nothing is deployed.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# Serve application and deployment names end up in Ray actor names and URLs.
MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_NAME_RE = re.compile(MODEL_NAME_PATTERN)


def validate_model_name(value: str, field: str = "name") -> str:
    """One rule for model names and aliases everywhere (config, CLI, registry)."""
    if not _NAME_RE.match(value):
        raise ValueError(
            f"{field}={value!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LayoutConfig(_Strict):
    """How one model is split over accelerators (the admission policy's candidate)."""

    tp: int = Field(1, ge=1, le=64, description="tensor parallel size")
    pp: int = Field(1, ge=1, le=64, description="pipeline parallel size")
    dp: int = Field(
        1,
        ge=1,
        le=64,
        description="vLLM data parallel ranks in one engine group (independent copies: replicas)",
    )
    ep: bool = Field(False, description="expert parallel (MoE experts spread, not split)")
    dcp: int = Field(1, ge=1, le=64, description="decode context parallel size (within TP)")

    @model_validator(mode="after")
    def _dcp_within_tp(self) -> LayoutConfig:
        if self.tp % self.dcp != 0:
            raise ValueError(
                f"dcp={self.dcp}: decode context parallel shards within the TP group, so it "
                f"must divide tp={self.tp}"
            )
        return self

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp

    def __str__(self) -> str:
        dcp = f"xDCP{self.dcp}" if self.dcp > 1 else ""
        return f"TP{self.tp}xPP{self.pp}xDP{self.dp}{dcp}" + ("+EP" if self.ep else "")


LAYOUT_ENGINE_ARGS: frozenset[str] = frozenset(
    {
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "data_parallel_size",
        "enable_expert_parallel",
        "decode_context_parallel_size",
        "distributed_executor_backend",
    }
)
"""vLLM arguments Switchyard derives from `layout` (and the accelerator kind)."""

OWNED_FRONTEND_ARGS: frozenset[str] = frozenset(
    {"host", "port", "uds", "api_key", "root_path", "model", "served_model_name"}
)
"""vLLM front-end settings Switchyard owns: the gateway listens, authenticates and names
models; `ssl_*` is owned too (see `owned_engine_arg`)."""


def owned_engine_arg(key: str) -> str | None:
    """Why `key` may not be set under `engine.extra`; None when it may."""
    if key in LAYOUT_ENGINE_ARGS or key.startswith("data_parallel_"):
        return "Switchyard derives it from `layout`; set layout.tp/pp/dp/ep/dcp instead"
    if key in OWNED_FRONTEND_ARGS or key.startswith("ssl_"):
        return "Switchyard's gateway owns it (the endpoint, its keys and model names)"
    return None


class EngineConfig(_Strict):
    """vLLM engine arguments: typed fields for what operators tune, `extra` for any other.

    A field left unset (None, or the default for the first four) takes the architecture's
    recipe (policies/recipes.py), then the platform's default (eager mode on the CPU), then
    vLLM's own. Only keys that are these fields or `extra` are accepted; `extra`'s keys are
    checked against the installed vLLM at the edge (switchyard/engine_args.py)."""

    max_model_len: int | None = Field(None, ge=16)
    gpu_memory_utilization: float = Field(0.9, gt=0.0, le=1.0)
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16"] = "auto"
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    enforce_eager: bool = False
    max_num_seqs: int | None = Field(None, ge=1, le=65536)
    max_num_batched_tokens: int | None = Field(None, ge=1, le=16_777_216)
    enable_prefix_caching: bool | None = None
    tool_call_parser: str | None = Field(None, min_length=1)
    reasoning_parser: str | None = Field(None, min_length=1)
    enable_auto_tool_choice: bool | None = None
    trust_remote_code: bool | None = None
    chat_template: str | None = Field(None, min_length=1)
    speculative_config: dict[str, Any] | None = None
    enable_sleep_mode: bool | None = None
    """Set by a fleet entry's `park_mode: sleep` (the engine can then sleep and wake)."""
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _only_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = [k for k in data if k not in cls.model_fields]
            if unknown:
                key = str(unknown[0])
                raise ValueError(
                    f"engine.{key} is not an engine field; put any other vLLM argument under "
                    f"engine.extra (engine fields: {', '.join(sorted(cls.model_fields))})"
                )
        return data

    @field_validator("extra")
    @classmethod
    def _extra_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if "-" in key:
                raise ValueError(
                    f"engine.extra.{key}: names use underscores ({key.replace('-', '_')})"
                )
            if key in cls.model_fields:
                raise ValueError(f"engine.extra.{key} is an engine field: set engine.{key} instead")
            why = owned_engine_arg(key)
            if why is not None:
                raise ValueError(f"engine.extra sets ['{key}'], which is not allowed: {why}")
        return value

    def engine_kwargs(self) -> dict[str, Any]:
        """The typed fields that are set (not None), as vLLM arguments, then `extra`."""
        kwargs: dict[str, Any] = {}
        for name in _OPTIONAL_ENGINE_FIELDS:
            value = getattr(self, name)
            if value is not None:
                kwargs[name] = value
        kwargs.update(self.extra)
        return kwargs

    def with_unset(self, defaults: dict[str, Any]) -> EngineConfig:
        """`defaults` (a recipe, a platform's) applied to the fields not set here."""
        data = self.model_dump(exclude_unset=True)
        for key, value in defaults.items():
            if key not in data or (data[key] is None and key in _OPTIONAL_ENGINE_FIELDS):
                data[key] = value
        return EngineConfig.model_validate(data)


_OPTIONAL_ENGINE_FIELDS = (
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_prefix_caching",
    "tool_call_parser",
    "reasoning_parser",
    "enable_auto_tool_choice",
    "trust_remote_code",
    "chat_template",
    "speculative_config",
    "enable_sleep_mode",
)


class AcceleratorConfig(_Strict):
    """What a layout's "GPU" means on this cluster.

    `gpu` asks Ray for real `GPU` resources and uses vLLM's Ray executor. `cpu` runs the
    CPU build of vLLM, one CPU engine worker per layout slot, placed on a custom resource
    that nodes declare as a stand-in for GPUs (Ray Serve LLM refuses logical GPUs on the CPU
    platform; a custom resource stands in for them, see docs/placement.md).
    """

    kind: Literal["gpu", "cpu"] = "gpu"
    standin_resource: str | None = Field(
        "accel_slot", description="cpu only: custom resource each layout slot takes"
    )
    cpu_kv_cache_space_gib: float = Field(
        1.0, gt=0.0, le=512.0, description="cpu only: VLLM_CPU_KVCACHE_SPACE per engine"
    )
    cpu_threads_bind: str = Field(
        "auto", description="cpu only: VLLM_CPU_OMP_THREADS_BIND ('auto', 'nobind', '0|1', ...)"
    )


class PlannedPlacement(_Strict):
    """Where admission placed the model's GPUs, as Ray's placement group is asked to take
    them. Set by the manager from admission's decision (never by a user: the fleet file and
    the flags have no such key) and kept with the deployed config, so a redeploy lands where
    admission judged it."""

    rank_nodes: tuple[str, ...] = ()
    """The Ray node id of each rank's bundle (stage by stage), for a replica admission placed
    across nodes; empty when the replica sits on one node, which Ray picks."""
    accelerator_type: str | None = None
    """Ray's `ray.io/accelerator-type` label of the GPUs admission planned with ("H100"), so
    a mixed cluster does not start the replica on another kind; None where the nodes have
    none (logical GPUs, CPU stand-ins)."""


class ModelDeploymentConfig(_Strict):
    """Everything needed to put one model behind the gateway."""

    name: str
    source: str = Field(min_length=1, description="hub id[@rev], local dir or miniature:NAME")
    aliases: tuple[str, ...] = ()
    layout: LayoutConfig = LayoutConfig()
    engine: EngineConfig = EngineConfig()
    accelerator: AcceleratorConfig = AcceleratorConfig()
    replicas: int = Field(1, ge=1, le=64)
    health_check_period_s: float = Field(5.0, gt=0.0, le=600.0)
    health_check_timeout_s: float = Field(30.0, gt=0.0, le=3600.0)
    placement: PlannedPlacement | None = None
    """Admission's placement (`PlannedPlacement`); None before admission."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return validate_model_name(value)

    @field_validator("aliases")
    @classmethod
    def _aliases(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for alias in value:
            validate_model_name(alias, "aliases")
        return value

    @model_validator(mode="after")
    def _layout_supported(self) -> ModelDeploymentConfig:
        if self.layout.dp > 1:
            # vLLM data parallel is one engine group spanning the DP ranks (Ray Serve LLM's
            # data-parallel pattern); not wired yet, so refuse rather than deploy something
            # else under the same name. Independent engine copies are `replicas`.
            raise ValueError(
                f"layout.dp={self.layout.dp}: vLLM data parallel (one engine group over "
                f"{self.layout.dp} ranks) is not deployed yet; allowed: 1. For "
                f"{self.layout.dp} independent engine copies set replicas={self.layout.dp}"
            )
        if self.accelerator.kind == "cpu" and self.layout.ep:
            raise ValueError(
                "layout.ep=true with accelerator.kind='cpu' is not allowed: vLLM's CPU "
                "build crashes a worker with expert parallel; use ep=false on the CPU"
            )
        return self
