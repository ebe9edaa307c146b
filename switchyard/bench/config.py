"""`switchyard bench`'s configuration, validated before a single request is sent."""

from __future__ import annotations

import math
from pathlib import Path
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
}
"""The command-line flag behind each field, so errors name what the user typed."""


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
