"""A cluster described in a file, for plans made with no cluster running (`diff --from`).

```yaml
accelerator: gpu              # or cpu (CPU stand-in slots)
nodes:
  - name: box-1
    gpu_model: rtx-pro-6000   # a built-in profile name or alias, or cpu-standin
    gpu_count: 8
    gpu_memory_gib: 95.6      # optional: the memory the driver reports
    disk_free_gib: 1200       # optional: free disk for weights (not checked when omitted)
```
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from domain.deployment_config import AcceleratorConfig
from domain.exit_codes import UserInputError
from domain.validation_message import dotted, validation_line
from policies.errors import PolicyInputError
from policies.inventory import ClusterInventory, GpuProfile, NodeInventory, gpu_profile
from policies.units import GIB


class DescribedNode(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    gpu_model: str = Field(min_length=1)
    gpu_count: int = Field(ge=1, le=1024)
    gpu_memory_gib: float | None = Field(None, gt=0, le=4096)
    disk_free_gib: float | None = Field(None, ge=0)

    @field_validator("gpu_model")
    @classmethod
    def _known(cls, value: str) -> str:
        if value != "cpu-standin":
            try:
                gpu_profile(value)
            except PolicyInputError as exc:
                raise ValueError(str(exc)) from None
        return value

    def profile(self) -> GpuProfile:
        if self.gpu_model == "cpu-standin":
            return GpuProfile.cpu_standin(self.gpu_memory_gib or 4.0)
        profile = gpu_profile(self.gpu_model)
        if self.gpu_memory_gib is not None:
            profile = replace(profile, memory_bytes=int(self.gpu_memory_gib * GIB))
        return profile


class DescribedCluster(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    accelerator: Literal["gpu", "cpu"] = "gpu"
    nodes: tuple[DescribedNode, ...] = Field(min_length=1)

    def inventory(self) -> ClusterInventory:
        return ClusterInventory(
            nodes=tuple(
                NodeInventory(
                    name=node.name,
                    gpu=node.profile(),
                    gpus=node.gpu_count,
                    free_gpus=node.gpu_count,
                    disk_free_bytes=None
                    if node.disk_free_gib is None
                    else int(node.disk_free_gib * GIB),
                )
                for node in self.nodes
            )
        )

    def accelerator_config(self) -> AcceleratorConfig:
        return AcceleratorConfig(kind=self.accelerator)


def read_described_cluster(path: Path) -> DescribedCluster:
    """The cluster described at `path`; a bad file is one line naming the field (exit 2)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise UserInputError(f"--inventory {path}: cannot read it ({exc})") from None
    try:
        return DescribedCluster.model_validate(data or {})
    except ValidationError as exc:
        raise UserInputError(f"--inventory {path}: {validation_line(exc, dotted(''))}") from None
