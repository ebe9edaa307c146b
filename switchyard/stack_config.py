"""`switchyard up`'s configuration: one validated model, built from flags or a file."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cluster.inventory.overrides import InventoryConfig
from cluster.startup.ray_runtime import LocalHeadConfig
from domain.deployment_config import ModelDeploymentConfig
from domain.endpoint_url import endpoint_url
from serve_apps.engine.fake_engine import FakeEngineSettings
from serve_apps.gateway.gateway_settings import GatewaySettings

DEFAULT_MODEL_SOURCE = "miniature:kimi-k2.5"
DEFAULT_MODEL_NAME = "mini-kimi-k2.5"
DEFAULT_ALIAS = "default"


def default_state_dir() -> Path:
    return Path(os.environ.get("SWITCHYARD_HOME", Path.home() / ".switchyard"))


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class StackConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    address: str | None = Field(None, description="Ray cluster address; None starts a local head")
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    state_dir: Path = Field(default_factory=default_state_dir)
    accelerator: Literal["gpu", "cpu"] = "cpu"
    accelerator_from_cluster: bool = False
    """`--accelerator auto` with `--address`: the kind is the joined cluster's (gpu where its
    nodes declare a `GPU`), decided once joined (`with_accelerator`)."""
    models: tuple[ModelDeploymentConfig, ...] = ()
    gateway: GatewaySettings = GatewaySettings()
    local_head: LocalHeadConfig = LocalHeadConfig()
    deploy_timeout_s: float = Field(900.0, gt=0, le=24 * 3600)
    inventory: InventoryConfig = InventoryConfig()
    """Overrides of probed node hardware (GPU model/memory/count/links, disk, RAM)."""
    keys_file: Path | None = None
    """The tenant keys file `up --keys` read (`switchyard keys reload` re-reads it)."""
    tls_cert_file: Path | None = None
    """The certificate file `up --tls-cert` read (local clients trust it)."""
    admin_key_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="the environment variable `up --admin-key-env` read the operator key "
        "from; local `status` reads the same one to use the gateway's status route",
    )
    fake_engines: FakeEngineSettings | None = None
    """Stand-in engines instead of vLLM (`up --fake-engines`), for tests and demos."""
    ray_auth_mode: str | None = Field(
        None, description="RAY_AUTH_MODE this process runs with; None when it is unset"
    )

    @model_validator(mode="after")
    def _checks(self) -> StackConfig:
        names = [m.name for m in self.models]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(
                f"models: names {duplicates} appear more than once; names must be unique"
            )
        aliases = [a for m in self.models for a in m.aliases]
        clash = sorted({a for a in aliases if aliases.count(a) > 1} | (set(aliases) & set(names)))
        if clash:
            raise ValueError(f"aliases: {clash} name more than one model, or a model name")
        if not is_loopback(self.host) and not self.gateway.has_keys:
            raise ValueError(
                f"host={self.host!r} exposes the endpoint beyond this machine without an API "
                "key; pass --api-key (or SWITCHYARD_API_KEY) or keep --host 127.0.0.1"
            )
        self._check_cluster_auth()
        return self

    def _check_cluster_auth(self) -> None:
        """Anything reachable from other machines needs Ray's token auth on the cluster too:
        without it, anyone who reaches a Ray port can submit jobs (arbitrary code)."""
        exposed = [
            f"{field}={value!r}"
            for field, value in (
                ("host", self.host),
                ("local_head.dashboard_host", self.local_head.dashboard_host),
                ("local_head.node_ip_address", self.local_head.node_ip_address),
            )
            if not is_loopback(value)
        ]
        if exposed and self.effective_ray_auth_mode != "token":
            raise ValueError(
                f"{exposed[0]} exposes this stack beyond this machine while Ray token "
                f"authentication is off (RAY_AUTH_MODE={self.effective_ray_auth_mode}); "
                "set RAY_AUTH_MODE=token (with the cluster's token) or keep 127.0.0.1"
            )

    def with_accelerator(self, kind: Literal["gpu", "cpu"]) -> StackConfig:
        """The same stack on `kind`: each model's accelerator and its eager mode (`up` sets
        `enforce_eager` by the accelerator alone, `eager_on`)."""
        models = tuple(
            m.model_copy(
                update={
                    "accelerator": m.accelerator.model_copy(update={"kind": kind}),
                    "engine": m.engine.model_copy(update={"enforce_eager": eager_on(kind)}),
                }
            )
            for m in self.models
        )
        return self.model_copy(
            update={"accelerator": kind, "models": models, "accelerator_from_cluster": False}
        )

    @property
    def effective_ray_auth_mode(self) -> str:
        if self.ray_auth_mode:
            return self.ray_auth_mode
        # A head Switchyard starts gets token auth by default (cluster/startup/ray_runtime.py); a
        # joined cluster's mode is whatever this process was given, here none.
        return "token" if self.address is None else "disabled"

    @property
    def endpoint(self) -> str:
        return endpoint_url("https" if self.gateway.tls else "http", self.host, self.port)


def eager_on(kind: Literal["gpu", "cpu"]) -> bool:
    """`up`'s `enforce_eager` for its models on `kind`: on the CPU, torch.compile adds about a
    minute per engine start on 2 cores and buys little for miniatures; GPU engines keep
    vLLM's default (compiled, CUDA graphs)."""
    return kind == "cpu"


def default_name_for(source: str) -> str:
    """A model name from its source text: miniature:X -> mini-X, org/name@rev -> name."""
    if source.startswith("miniature:"):
        return "mini-" + source.removeprefix("miniature:")
    tail = source.rstrip("/").split("@", 1)[0].rsplit("/", 1)[-1]
    return tail.lower() or "model"
