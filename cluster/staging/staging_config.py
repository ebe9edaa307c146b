"""The user-facing staging settings, validated before anything touches a disk or the network."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from domain.exit_codes import UserInputError
from domain.validation_message import dotted, validation_line

GIB = 1024**3
CACHE_DIR_ENV = "SWITCHYARD_CACHE_DIR"


class StagingMode(StrEnum):
    """Where weights are staged."""

    SHARED = "shared"
    """`cache_dir` is one filesystem every node mounts (NFS, Lustre, the seed's /shared):
    download once, then check it is visible on every node that needs it."""
    PER_NODE = "per_node"
    """`cache_dir` is a local disk on each node: one Ray task per node that hosts a shard
    downloads in parallel, and the results are compared before the model counts as staged."""


class StagingConfig(BaseModel):
    """How and where model weights are staged (the `staging` section of the cluster config)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cache_dir: Path
    """Root of the weight cache; the same path on every node."""
    mode: StagingMode = StagingMode.SHARED
    reserve_gib: float = Field(default=20.0, ge=0)
    """Space kept free on the cache volume for everything else (logs, Ray spill, the OS)."""
    allow_eviction: bool = False
    """Whether staging may delete least recently used models that are neither serving nor
    pinned, when (and only when) that is what makes the new model fit."""
    verify_sha256: bool = True
    """Hash LFS files against the Hub's sha256 before marking a model staged (sizes are
    always checked). Hashing reads every byte once more after the download."""
    download_workers: int = Field(default=8, ge=1, le=64)
    """Files downloaded at once by `snapshot_download`."""
    progress_interval_s: float = Field(default=10.0, gt=0)
    """Period of the plain progress lines written when stderr is not a terminal (ray job logs)."""
    hub_endpoint: str | None = None
    """Hub URL; None means `HF_ENDPOINT` from the environment, else https://huggingface.co."""
    entry_lock_timeout_s: float = Field(default=6 * 3600.0, gt=0)
    """How long a staging waits for another process staging the same model on the node."""
    reservation_stale_after_s: float = Field(default=600.0, gt=0)
    """A space reservation held by another host (shared cache) that has not been refreshed
    for this long is treated as abandoned."""

    @field_validator("cache_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.expanduser().absolute()

    @field_validator("hub_endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/") if value is not None else None

    @property
    def reserve_bytes(self) -> int:
        return int(self.reserve_gib * GIB)


def load_staging_config(data: Mapping[str, Any]) -> StagingConfig:
    """Validate raw settings; bad ones raise `UserInputError` naming field, value and rule."""
    try:
        return StagingConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise UserInputError(validation_line(exc, dotted("staging"))) from None


def default_cache_dir(environ: Mapping[str, str]) -> Path:
    """`$SWITCHYARD_CACHE_DIR`, else `~/.cache/switchyard` (for commands run without a config)."""
    configured = environ.get(CACHE_DIR_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "switchyard"
