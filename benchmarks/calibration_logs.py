"""The calibration set: real vLLM start-up logs (or reports quoting vLLM's own KV figures),
parsed once from `benchmarks/kv_calibration_logs.yaml` into typed records.

Each entry records where it comes from (the link, what kind of source), the vLLM version
(as stated, or inferred with a note), the GPU, every engine argument and environment
variable the source shows, and the figures vLLM logged. `request()` turns an entry into the
planner's request exactly as `switchyard plan` would build it for that deployment; nothing of
the logged figures goes into it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from cluster.miniature_generator.reference import load_reference_config
from policies.admission import AdmissionRequest
from policies.checkpoint.hf_config import parse_hf_config
from policies.checkpoint.model_spec import ModelSpec
from policies.checkpoint.weights import WeightSize, override_weights
from policies.engine_memory import FittedConstants
from policies.inventory import ClusterInventory, GpuProfile, NodeInventory, gpu_profile
from policies.layout import Layout
from policies.memory import KvCacheDtype
from policies.units import GIB
from policies.vllm_versions import MemoryRules, VllmVersion

HERE = Path(__file__).resolve().parent
LOGS_FILE = HERE / "kv_calibration_logs.yaml"
CONFIGS = HERE / "calibration_configs"
FIXTURES = HERE.parent / "tests" / "unit" / "policies" / "fixtures"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GpuSpec(_Strict):
    profile: str
    """A GPU kind the planner knows (`policies.inventory`), the closest to the one logged."""
    memory_gib: float | None = None
    """The memory vLLM sees, where the logged GPU is not that profile (a GB10's unified
    memory, an RTX 5090's 32 GB)."""
    name: str | None = None
    count: int = Field(ge=1)
    unified_memory: bool = False
    """The GPU shares the host's memory (GB10, Thor, Orin). vLLM then takes free memory to
    be the host's available memory (vllm/utils/mem_utils.py `MemorySnapshot.measure`:
    psutil's `available` on integrated GPUs), so whatever the host allocates while vLLM
    profiles (a cold torch.compile, other processes) is charged to the KV cache, and no
    config or engine argument predicts it. Such a log is shown, neither fitted nor held to
    the target."""


class Logged(_Strict):
    """vLLM's own figures, per GPU worker; None where the source does not give one."""

    model_loading_gib: float | None = None
    available_kv_cache_gib: float | None = None
    gpu_kv_cache_tokens: int = Field(ge=1)
    """"GPU KV cache size" (with DCP, vLLM's printed total: per-rank tokens x dcp)."""
    cuda_graph_gib: float | None = None
    cuda_graph_line: str | None = None
    """Which line the CUDA-graph figure is from (an estimate, or what capture took)."""


class CalibrationLog(_Strict):
    id: str
    link: str
    source: str
    """What kind of source: a raw log, a wiki table (rounded), a write-up of logs."""
    model: str
    """The Hugging Face repository the log ran."""
    config: str
    """Where the planner reads its config.json: `reference/NAME` (the story's configs),
    `fixture/NAME` (tests/unit/policies/fixtures) or `calibration/NAME`
    (benchmarks/calibration_configs)."""
    config_note: str | None = None
    text_model_only: bool = False
    """The checkpoint is the config's text model alone (a wrapper's vision parameters are
    not in it)."""
    weights_gib: float | None = None
    """The checkpoint's size on disk as the operator would pass `--weights-gib`; None: the
    planner's own estimate from the config."""
    vllm_version: str
    vllm_version_note: str
    gpu: GpuSpec
    engine: dict[str, Any]
    """Every engine argument the source shows (vLLM's names, with underscores), and the
    defaults it shows vLLM chose where they differ from the planner's own."""
    engine_note: str | None = None
    """Where an engine value comes from when it is not among the source's arguments."""
    environment: dict[str, str] = Field(default_factory=dict)
    logged: Logged
    quote: str
    note: str | None = None

    def spec(self) -> ModelSpec:
        spec = parse_hf_config(_config(self.config))
        return replace(spec, extra_params=0) if self.text_model_only else spec

    def weights(self, spec: ModelSpec) -> WeightSize | None:
        if self.weights_gib is None:
            return None
        return override_weights(spec, int(self.weights_gib * GIB))

    def layout(self) -> Layout:
        e = self.engine
        return Layout(
            tp=int(e.get("tensor_parallel_size", 1)),
            pp=int(e.get("pipeline_parallel_size", 1)),
            dp=int(e.get("data_parallel_size", 1)),
            ep=bool(e.get("enable_expert_parallel", False)),
            dcp=int(e.get("decode_context_parallel_size", 1)),
        )

    def inventory(self) -> ClusterInventory:
        profile = gpu_profile(self.gpu.profile)
        if self.gpu.memory_gib is not None:
            profile = replace(
                profile,
                name=self.gpu.name or profile.name,
                memory_bytes=int(self.gpu.memory_gib * GIB),
            )
        return _inventory(profile, self.gpu.count)

    def rules(self) -> MemoryRules:
        return MemoryRules.from_environment(VllmVersion.parse(self.vllm_version), self.environment)

    def request(self, constants: FittedConstants | None = None) -> AdmissionRequest:
        """The planner's request for this deployment, from the engine arguments shown
        (`constants`: the fitted ones to use; None: the memory model's own)."""
        e = self.engine
        kv = str(e.get("kv_cache_dtype", "auto"))
        compilation = e.get("compilation_config") or {}
        if isinstance(compilation, str):
            compilation = json.loads(compilation)
        return AdmissionRequest(
            layout=self.layout(),
            gpu_memory_utilization=float(e.get("gpu_memory_utilization", 0.9)),
            kv_cache_dtype=KvCacheDtype.FP8 if kv.startswith("fp8") else KvCacheDtype.AUTO,
            max_model_len=_int_or_none(e.get("max_model_len")),
            max_num_seqs=_int_or_none(e.get("max_num_seqs")),
            max_num_batched_tokens=_int_or_none(e.get("max_num_batched_tokens")),
            enforce_eager=bool(e.get("enforce_eager", False)),
            language_model_only=bool(e.get("language_model_only", False)),
            full_cuda_graphs=compilation.get("cudagraph_mode", "FULL_AND_PIECEWISE") != "PIECEWISE",
            vllm=self.rules(),
            constants=constants or FittedConstants(),
        )


class CalibrationSet(_Strict):
    logs: list[CalibrationLog]


def load_logs(path: Path = LOGS_FILE) -> list[CalibrationLog]:
    """Every entry of the data file; a malformed one fails naming its field."""
    data = yaml.safe_load(path.read_text())
    logs = CalibrationSet.model_validate(data).logs
    ids = [log.id for log in logs]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: duplicate ids in {ids}")
    return logs


def _config(where: str) -> dict[str, Any]:
    kind, _, name = where.partition("/")
    if kind == "reference":
        data: dict[str, Any] = load_reference_config(f"{name}.config.json")
        return data
    folder = {"fixture": FIXTURES, "calibration": CONFIGS}.get(kind)
    if folder is None:
        raise ValueError(f"config {where!r}: expected reference/, fixture/ or calibration/")
    loaded: dict[str, Any] = json.loads((folder / f"{name}.config.json").read_text())
    return loaded


def _inventory(profile: GpuProfile, count: int) -> ClusterInventory:
    node = NodeInventory(name="node-0", gpu=profile, gpus=count, free_gpus=count)
    return ClusterInventory(nodes=(node,))


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)
