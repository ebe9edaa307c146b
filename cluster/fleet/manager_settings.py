"""The fleet manager's settings: one validated model, sent to the manager actor as JSON."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cluster.inventory.overrides import InventoryConfig
from cluster.staging.staging_config import StagingConfig, StagingMode
from domain.deployment_config import AcceleratorConfig
from serve_apps.engine.fake_engine import FakeEngineSettings

MANAGER_DIR = "manager"
"""The state directory's subdirectory with the journal and `fleet.json`."""


class ManagerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    state_dir: Path
    accelerator: AcceleratorConfig = AcceleratorConfig(kind="cpu")
    standin_memory_gib: float = Field(4.0, gt=0, description="planning memory of a CPU slot")
    drain_timeout_s: float = Field(120.0, gt=0, le=3600)
    deploy_timeout_s: float = Field(900.0, gt=0, le=24 * 3600)
    free_timeout_s: float = Field(180.0, gt=0, le=3600)
    warmup_timeout_s: float = Field(300.0, gt=0, le=3600)
    hold_timeout_s: float = Field(
        600.0,
        gt=0,
        le=86400,
        description="the gateways' hold bound (GatewaySettings.hold_timeout_s): a swap "
        "predicted to hold longer warns, and its held requests get 503 + Retry-After at once",
    )
    health_period_s: float = Field(
        5.0, gt=0, le=3600, description="how often running replicas are checked (degraded)"
    )
    inventory: InventoryConfig = InventoryConfig()
    """Probe settings and the operator's overrides of probed node values."""
    fake_engines: FakeEngineSettings | None = None
    """Serve every model with a stand-in engine instead of vLLM (serve_apps/engine/fake_engine.py):
    for tests and demos of the gateway, routing and fleet operations."""

    @property
    def manager_dir(self) -> Path:
        """The journal and `fleet.json`."""
        return self.state_dir / MANAGER_DIR

    @property
    def staging(self) -> StagingConfig:
        """Where and with which reserve the manager stages weights: `cache` under the state
        directory on every node (an inventory override may move a node's elsewhere).

        Per node, not declared shared: nodes that do see one filesystem there are found by
        its marker file (`staging/cache_identity.py`) and staged once; nodes with local
        disks each get their own copy."""
        return StagingConfig(
            cache_dir=self.state_dir / "cache", reserve_gib=1.0, mode=StagingMode.PER_NODE
        )

    @property
    def accelerator_resource(self) -> str:
        """The Ray resource a layout slot takes: `GPU`, or the CPU stand-in resource."""
        if self.accelerator.kind == "gpu":
            return "GPU"
        return self.accelerator.standin_resource or "CPU"
