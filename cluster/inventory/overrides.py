"""Operator overrides of probed node values: the `inventory` section of the cluster config.

A probe can be wrong or blind (a driver without NVLink reporting, a container that sees the
host's disk, GPUs hidden from the probe). Each override names one node by IP, by name
(hostname or Ray node id, or its first characters) or by a Ray node label, and sets any of
the values admission plans with. Later overrides win over earlier ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cluster.inventory.records import GpuFactSource, NodeFacts, NodeProbe
from domain.exit_codes import UserInputError
from domain.validation_message import dotted, validation_line
from policies.errors import UnknownGpu
from policies.inventory import BUILTIN_GPU_PROFILES, Interconnect, gpu_profile
from policies.units import GIB

if TYPE_CHECKING:
    # node_roles imports this module (NodeOverride): only the type is needed here.
    from cluster.inventory.node_roles import NodeIdentity

STANDIN_MODEL = "cpu-standin"
"""The model name of a CPU stand-in accelerator slot."""


def allowed_gpu_models() -> tuple[str, ...]:
    return (*sorted(BUILTIN_GPU_PROFILES), STANDIN_MODEL)


class NodeOverride(BaseModel):
    """One node's corrected values; every value left out keeps what the probe found."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_ip: str | None = None
    node_name: str | None = Field(None, min_length=1)
    """Hostname, Ray node id, or the start of the node id (at least 8 characters)."""
    label: str | None = Field(None, pattern=r"^[^=\s]+=[^=\s]*$")
    """A Ray node label as `key=value`."""
    gpu_model: str | None = None
    gpu_memory_gib: float | None = Field(None, gt=0, le=4096)
    """Memory per accelerator as the driver reports it."""
    gpu_count: int | None = Field(None, ge=0, le=1024)
    interconnect: Interconnect | None = None
    disk_free_gib: float | None = Field(None, ge=0)
    """Free space on the weight cache volume."""
    host_ram_gib: float | None = Field(None, gt=0)
    cache_dir: Path | None = None
    """This node's weight cache root, when it is not `staging.cache_dir` (another disk, a
    different mount point of a shared cache). Absolute."""
    ingress: bool | None = None
    """Whether the node runs gateway replicas on the endpoint port (the head does unless
    this says false; other nodes do when this, or their Ray label
    `switchyard.io/role=ingress`, says so)."""

    @field_validator("gpu_model")
    @classmethod
    def _known_model(cls, value: str | None) -> str | None:
        if value is None or value == STANDIN_MODEL:
            return value
        try:
            return gpu_profile(value).name
        except UnknownGpu:
            raise ValueError(
                f"unknown GPU model; allowed: {', '.join(allowed_gpu_models())}"
            ) from None

    @field_validator("cache_dir")
    @classmethod
    def _absolute_cache_dir(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_absolute():
            raise ValueError("must be an absolute path")
        return value

    @model_validator(mode="after")
    def _one_selector(self) -> NodeOverride:
        chosen = [n for n in ("node_ip", "node_name", "label") if getattr(self, n) is not None]
        if len(chosen) != 1:
            raise ValueError(
                "name the node with exactly one of node_ip, node_name, label "
                f"(got {chosen or 'none'})"
            )
        return self

    @property
    def selector(self) -> str:
        if self.node_ip is not None:
            return f"node_ip={self.node_ip}"
        if self.node_name is not None:
            return f"node_name={self.node_name}"
        return f"label {self.label}"

    def matches(self, probe: NodeProbe | NodeIdentity) -> bool:
        if self.node_ip is not None:
            return probe.node_ip == self.node_ip
        if self.node_name is not None:
            name = self.node_name
            return name == probe.hostname or (len(name) >= 8 and probe.node_id.startswith(name))
        key, _, value = (self.label or "").partition("=")
        return (key, value) in probe.labels


class InventoryConfig(BaseModel):
    """How the manager learns the cluster's hardware."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    overrides: tuple[NodeOverride, ...] = ()
    probe_timeout_s: float = Field(60.0, gt=0, le=600)
    """How long admission waits for every node's probe task."""


def load_inventory_config(data: Mapping[str, Any]) -> InventoryConfig:
    """Validate raw settings; bad ones raise `UserInputError` naming field, value and rule."""
    try:
        return InventoryConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise UserInputError(validation_line(exc, dotted("inventory"))) from None


def read_inventory_file(path: Path) -> InventoryConfig:
    """The `inventory` section from a YAML or JSON file (JSON is YAML)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        # YAML's parse errors span several lines (with a caret); the CLI's error is one.
        detail = " ".join(str(exc).split())
        raise UserInputError(f"--inventory: cannot read {path}: {detail}") from None
    if not isinstance(data, dict):
        raise UserInputError(f"--inventory: {path} must hold a mapping, got {type(data).__name__}")
    return load_inventory_config(data)


def base_facts(probe: NodeProbe, *, standin_memory_gib: float) -> NodeFacts:
    """The probe's own values in the shape admission reads."""
    devices = probe.gpus.devices
    if devices:
        models = [d.model for d in devices]
        count = ray_gpu_count(probe)
        return NodeFacts(
            node_id=probe.node_id,
            node_ip=probe.node_ip,
            hostname=probe.hostname,
            accelerator="gpu" if count else "none",
            # A node mixing kinds is planned as its most common kind, with its smallest memory.
            gpu_model=max(set(models), key=models.count),
            gpu_count=count,
            gpu_memory_bytes=min(d.usable_bytes for d in devices),
            interconnect=probe.gpus.interconnect,
            disk_free_bytes=probe.disk_free_bytes,
            host_ram_bytes=probe.host_ram_bytes,
            cache_dir=probe.cache_dir,
            source=probe.gpus.source,
            notes=probe.notes,
            ray_gpus=probe.ray_gpus,
            probed_gpus=len(devices),
            ray_accelerator_type=probe.ray_accelerator_type,
        )
    standin = probe.standin_slots > 0
    return NodeFacts(
        node_id=probe.node_id,
        node_ip=probe.node_ip,
        hostname=probe.hostname,
        accelerator="standin" if standin else "none",
        gpu_model=STANDIN_MODEL if standin else "",
        gpu_count=probe.standin_slots,
        gpu_memory_bytes=int(standin_memory_gib * GIB) if standin else 0,
        interconnect=Interconnect.HOST_MEMORY if standin else None,
        disk_free_bytes=probe.disk_free_bytes,
        host_ram_bytes=probe.host_ram_bytes,
        cache_dir=probe.cache_dir,
        source=GpuFactSource.DECLARED if standin else GpuFactSource.NONE,
        notes=probe.notes,
        cpu_amx_tiles=probe.cpu_amx_tiles,
        ray_gpus=probe.ray_gpus,
    )


def ray_gpu_count(probe: NodeProbe) -> int:
    """The GPUs admission may plan on a node whose GPUs the probe saw: Ray's count where it
    differs (Ray places the engines, so a GPU it was not given cannot host one: a raylet
    started with `--num-gpus` or a `CUDA_VISIBLE_DEVICES`), else the probe's."""
    seen = len(probe.gpus.devices)
    if probe.ray_gpus is None or not probe.gpus.source.sees_gpus:
        return seen
    return probe.ray_gpus


def gpu_count_warnings(facts: tuple[NodeFacts, ...]) -> list[str]:
    """Where Ray's count and the probe's differ, and raylets of one machine that declare more
    GPUs together than it has (each counted all of them: two engines could open one GPU)."""
    warnings = []
    by_host: dict[str, list[NodeFacts]] = {}
    for node in facts:
        if not node.source.sees_gpus or node.ray_gpus is None:
            continue
        by_host.setdefault(node.hostname, []).append(node)
        if node.ray_gpus != node.probed_gpus:
            warnings.append(
                f"node {node.name}: Ray declares {node.ray_gpus} GPUs and "
                f"{node.source.value} sees {node.probed_gpus}; planned with Ray's "
                f"{node.ray_gpus} (its raylet's --num-gpus or CUDA_VISIBLE_DEVICES)"
            )
    for host, nodes in sorted(by_host.items()):
        declared = sum(n.ray_gpus or 0 for n in nodes)
        machine = max(n.probed_gpus for n in nodes)
        if len(nodes) > 1 and declared > machine:
            names = ", ".join(n.name for n in nodes)
            warnings.append(
                f"host {host}: its raylets ({names}) declare {declared} GPUs together and it "
                f"has {machine}: each counted the machine's GPUs; start every raylet with "
                "--num-gpus (the control-plane head 0)"
            )
    return warnings


def apply_overrides(
    probe: NodeProbe, overrides: tuple[NodeOverride, ...], *, standin_memory_gib: float
) -> NodeFacts:
    facts = base_facts(probe, standin_memory_gib=standin_memory_gib)
    values: dict[str, Any] = {}
    for override in overrides:
        if not override.matches(probe):
            continue
        if override.gpu_model is not None:
            values["gpu_model"] = override.gpu_model
        if override.gpu_memory_gib is not None:
            values["gpu_memory_bytes"] = int(override.gpu_memory_gib * GIB)
        if override.gpu_count is not None:
            values["gpu_count"] = override.gpu_count
        if override.interconnect is not None:
            values["interconnect"] = override.interconnect
        if override.disk_free_gib is not None:
            values["disk_free_bytes"] = int(override.disk_free_gib * GIB)
        if override.host_ram_gib is not None:
            values["host_ram_bytes"] = int(override.host_ram_gib * GIB)
    if not values:
        return facts
    changed = replace(facts, **values, overridden=tuple(sorted(values)))
    model = changed.gpu_model
    if "gpu_model" in values and model != STANDIN_MODEL and "gpu_memory_bytes" not in values:
        # A corrected model brings its memory unless the override also gives one.
        changed = replace(changed, gpu_memory_bytes=gpu_profile(model).memory_bytes)
    if changed.gpu_count == 0:
        return replace(changed, accelerator="none")
    if model == STANDIN_MODEL:
        return replace(changed, accelerator="standin")
    return replace(changed, accelerator="gpu") if model else changed


def unmatched(overrides: tuple[NodeOverride, ...], probes: list[NodeProbe]) -> list[str]:
    """Selectors of overrides that name no live node (most likely a typo)."""
    return [o.selector for o in overrides if not any(o.matches(p) for p in probes)]
