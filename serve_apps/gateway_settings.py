"""Settings of the OpenAI gateway (one pydantic model, validated before deploy)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

# What can arrive, unchanged, in `Authorization: Bearer KEY`: header bytes are read as
# Latin-1 and surrounding whitespace is stripped, so any other key could never match.
_KEY_RE = re.compile(r"[\x21-\x7e]+")


class GatewaySettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    api_keys: tuple[SecretStr, ...] = Field(
        (), description="accepted bearer tokens; empty means the endpoint is open"
    )
    # At most 64 MiB: a body travels on to the model replica in one Serve gRPC message,
    # capped at 128 MiB (cluster/serve_tuning.py), and grows when pickled.
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    retry_after_s: int = Field(5, ge=1, le=3600, description="Retry-After on 503 answers")
    first_chunk_timeout_s: float = Field(
        600.0, gt=0, le=86400, description="give up (503) if a model sends nothing for this long"
    )
    hold_timeout_s: float = Field(
        600.0, gt=0, le=86400, description="longest a request waits for a swap to finish"
    )
    max_held_requests: int = Field(
        1024, ge=0, le=1_000_000, description="bound of the queue held during a swap"
    )
    health_poll_s: float = Field(1.0, gt=0, le=60, description="replica health refresh period")
    replicas: int = Field(1, ge=1, le=64, description="gateway replicas")
    direct_streaming: bool = Field(
        True,
        description="stream from the engine replicas' own HTTP ports (one hop less per token);"
        " off: every request goes through Ray Serve handles",
    )

    @field_validator("api_keys")
    @classmethod
    def _usable_keys(cls, keys: tuple[SecretStr, ...]) -> tuple[SecretStr, ...]:
        for i, key in enumerate(keys):
            if not _KEY_RE.fullmatch(key.get_secret_value()):
                # Never echo the key itself: this message reaches the terminal and logs.
                raise ValueError(
                    f"API key #{i + 1} is empty or has characters other than printable "
                    "ASCII without spaces; an HTTP Bearer token can't carry it"
                )
        return keys
