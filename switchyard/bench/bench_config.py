"""`switchyard bench`'s configuration, validated before a single request is sent."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DEFAULT_CONCURRENCY: tuple[int, ...] = (1, 8, 32, 128)

FLAG_OF_FIELD: dict[str, str] = {
    "url": "--url",
    "model": "--model",
    "api_key": "--api-key",
    "concurrency": "--concurrency",
    "num_prompts": "--num-prompts",
    "input_len": "--input-len",
    "output_len": "--output-len",
    "request_rate_per_s": "--request-rate",
    "num_warmups": "--num-warmups",
    "json_path": "--json",
    "plot_path": "--plot",
    "tokenizer_dir": "--tokenizer",
    "during_swap": "--during-swap",
}
"""The command-line flag behind each field, so errors name what the user typed."""

FLAG_OF_SWAP_FIELD: dict[str, str] = {
    "old": "--during-swap",
    "source": "--during-swap",
    "new_name": "--name",
    "swap_delay_s": "--swap-delay",
    "swap_tail_s": "--swap-tail",
    "address": "--address",
}
"""The same, for the fields of `DuringSwapConfig` (nested under `during_swap`)."""


class DuringSwapConfig(BaseModel):
    """`--during-swap OLD SOURCE --name NEW`: the swap to trigger under a steady load."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    old: str = Field(min_length=1, description="the serving model to replace")
    source: str = Field(min_length=1, description="NEW's source: hub id, local dir, miniature")
    new_name: str = Field(min_length=1, description="NEW's served name (--name)")
    swap_delay_s: float = Field(
        5.0, ge=0, le=3600, description="steady load before the swap is triggered"
    )
    swap_tail_s: float = Field(5.0, ge=0, le=3600, description="steady load after it ended")
    address: str | None = Field(None, description="Ray address; None: $RAY_ADDRESS or up's")
    strategy: Literal["auto", "make-before-break", "break-before-make"] = "auto"
    prefetch_weights: bool = True
    deploy_early: bool = True

    @model_validator(mode="after")
    def _different_names(self) -> DuringSwapConfig:
        if self.old == self.new_name:
            raise ValueError("--name must differ from OLD (clients tell them apart by name)")
        return self


class BenchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(description="OpenAI base URL, ending in /v1")
    model: str = Field(min_length=1, description="served model name or alias")
    api_key: str | None = None
    concurrency: tuple[int, ...] = Field(DEFAULT_CONCURRENCY, min_length=1)
    num_prompts: int = Field(128, ge=1, le=1_000_000, description="requests per level")
    input_len: int = Field(128, ge=1, le=1_000_000, description="prompt tokens per request")
    output_len: int = Field(64, ge=1, le=1_000_000, description="output tokens per request")
    request_rate_per_s: float | None = Field(
        None, description="Poisson arrival rate; None releases every request at once"
    )
    num_warmups: int = Field(2, ge=0, le=10_000, description="unmeasured requests first")
    json_path: Path | None = None
    plot_path: Path | None = None
    tokenizer_dir: Path | None = None
    seed: int = 0
    during_swap: DuringSwapConfig | None = Field(
        None, description="a steady load at one concurrency through this swap, not a sweep"
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http(s) URL such as http://127.0.0.1:8000/v1")
        # A bare server address means its OpenAI API at /v1, as clients usually assume.
        if parts.path in ("", "/"):
            return url.rstrip("/") + "/v1"
        return url.rstrip("/")

    @field_validator("concurrency")
    @classmethod
    def _levels(cls, levels: tuple[int, ...]) -> tuple[int, ...]:
        if any(level < 1 for level in levels):
            raise ValueError("every level must be an integer >= 1")
        if len(set(levels)) != len(levels):
            raise ValueError("levels must not repeat")
        return levels

    @field_validator("request_rate_per_s")
    @classmethod
    def _rate(cls, rate: float | None) -> float | None:
        if rate is None or (math.isinf(rate) and rate > 0):
            return None
        if math.isnan(rate) or rate <= 0:
            raise ValueError("must be a positive number of requests per second, or inf")
        return rate

    @field_validator("plot_path")
    @classmethod
    def _png(cls, path: Path | None) -> Path | None:
        if path is not None and path.suffix.lower() != ".png":
            raise ValueError("must name a .png file")
        return path

    @field_validator("tokenizer_dir")
    @classmethod
    def _tokenizer_dir(cls, path: Path | None) -> Path | None:
        if path is not None and not path.is_dir():
            raise ValueError("must be a directory holding the model's tokenizer files")
        return path

    @model_validator(mode="after")
    def _outputs_differ(self) -> BenchConfig:
        if self.json_path is not None and self.json_path == self.plot_path:
            raise ValueError("--json and --plot name the same file")
        return self

    @model_validator(mode="after")
    def _one_level_during_swap(self) -> BenchConfig:
        if self.during_swap is None:
            return self
        if len(self.concurrency) != 1:
            raise ValueError("--concurrency: --during-swap runs one steady level, give one")
        if self.plot_path is not None:
            raise ValueError("--plot: not available with --during-swap (no sweep to plot)")
        return self
