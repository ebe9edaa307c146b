"""Settings of the OpenAI gateway (one pydantic model, validated before deploy)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from domain.tenant_keys import TenantTable, api_key_tenants

# What can arrive, unchanged, in `Authorization: Bearer KEY`: header bytes are read as
# Latin-1 and surrounding whitespace is stripped, so any other key could never match.
_KEY_RE = re.compile(r"[\x21-\x7e]+")


class GatewaySettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    api_keys: tuple[SecretStr, ...] = Field(
        (), description="accepted bearer tokens; empty means the endpoint is open"
    )
    # At most 64 MiB: a body travels on to the model replica in one Serve gRPC message,
    # capped at 128 MiB (cluster/startup/serve_tuning.py), and grows when pickled.
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    retry_after_s: int = Field(5, ge=1, le=3600, description="Retry-After on 503 answers")
    inter_token_sample_every: int = Field(
        8,
        ge=1,
        le=1024,
        description="record one inter-token gap in this many in the ITL histogram (1: every "
        "gap); a recorded gap costs about 3 us of the gateway's CPU, a relayed chunk about 45",
    )
    first_chunk_timeout_s: float = Field(
        600.0, gt=0, le=86400, description="give up (503) if a model sends nothing for this long"
    )
    hold_timeout_s: float = Field(
        600.0, gt=0, le=86400, description="longest a request waits for a swap to finish"
    )
    max_held_requests: int = Field(
        1024, ge=0, le=1_000_000, description="bound of the queue held during a swap"
    )
    tenants: TenantTable = Field(
        TenantTable(),
        description="tenants from `up --keys` or a fleet file's gateway.keys (SHA-256 of each"
        " key, never the key); `switchyard keys reload` publishes newer tables",
    )
    quota_sync_s: float = Field(
        1.0,
        gt=0,
        le=60,
        description="how often each gateway replica trades tenant usage with the others: "
        "together they may overshoot a quota by what they admit in twice this long",
    )
    admin_key_sha256: str | None = Field(
        None,
        pattern=r"^[0-9a-f]{64}$",
        description="SHA-256 (lowercase hex) of the operator key that opens the operator "
        "routes (`GET /switchyard/v1/status`; `up --admin-key-env NAME`); none: those routes "
        "are open while the endpoint has no keys, and refused once it has",
    )
    tls_cert_pem: str | None = Field(
        None, description="the endpoint's certificate chain (PEM; `up --tls-cert`): HTTPS"
    )
    tls_key_pem: SecretStr | None = Field(
        None, description="the certificate's private key (PEM; `up --tls-key`)"
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

    @model_validator(mode="after")
    def _one_kind_of_key(self) -> GatewaySettings:
        if self.api_keys and self.tenants.tenants:
            raise ValueError(
                "api_keys and tenants: give either --api-key/SWITCHYARD_API_KEY or a keys "
                "file (--keys, gateway.keys), not both"
            )
        return self

    @model_validator(mode="after")
    def _tls_pair(self) -> GatewaySettings:
        if (self.tls_cert_pem is None) != (self.tls_key_pem is None):
            raise ValueError("tls: give both the certificate and its key, or neither")
        return self

    @property
    def tls(self) -> bool:
        return self.tls_cert_pem is not None

    def initial_tenants(self) -> TenantTable:
        """What the endpoint accepts until the registry has a newer table: the keys file's
        tenants, or each `--api-key` as tenant `api-key-N` (every model, no quota)."""
        if self.api_keys:
            keys = tuple(k.get_secret_value() for k in self.api_keys)
            return TenantTable(version=0, tenants=api_key_tenants(keys), source="--api-key")
        return self.tenants

    @property
    def has_keys(self) -> bool:
        return bool(self.api_keys or self.tenants.tenants)
