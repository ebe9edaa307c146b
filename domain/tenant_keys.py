"""Tenants of the endpoint: who may call it, which models, how much.

The user writes a keys file (`up --keys FILE`, or a fleet file's `gateway.keys`): a list of
entries, each naming a tenant and its key, either as `key_env` (an environment variable of
the process that loads the file: `up`, `switchyard keys reload`, or a `ray job`'s runtime
env) or as `key_sha256` (the key's SHA-256, lowercase hex). Loading resolves every entry to
a `Tenant`, which holds the key's SHA-256 only: the key itself never leaves the loading
process, so it cannot reach the gateway's logs, metrics, the registry or `status`.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from domain.exit_codes import UserInputError
from domain.validation_message import dotted, validation_line

KEYS_FILE_FACT = "keys_file"
"""The fleet registry's fact naming the keys file `up --keys` read (an absolute path):
`switchyard keys reload` without FILE re-reads it."""

_KEY_CHARS = re.compile(r"[\x21-\x7e]+")
"""What `Authorization: Bearer KEY` can carry unchanged (printable ASCII, no spaces)."""


class KeyEntry(BaseModel):
    """One tenant's entry in a keys file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
        description="the tenant's name: metrics, logs and `status` show it, never the key",
    )
    key_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="environment variable holding the key, read by the process loading it",
    )
    key_sha256: str | None = Field(
        None, pattern=r"^[0-9a-f]{64}$", description="the key's SHA-256, lowercase hex"
    )
    models: tuple[str, ...] | None = Field(
        None, description="model names or aliases this key may use; omitted: all, []: none"
    )
    requests_per_minute: int | None = Field(
        None, ge=1, description="requests over any 60 s window; omitted: unlimited"
    )
    tokens_per_minute: int | None = Field(
        None,
        ge=1,
        description="prompt + generated tokens over any 60 s window; omitted: unlimited",
    )

    @model_validator(mode="after")
    def _one_key(self) -> KeyEntry:
        if (self.key_env is None) == (self.key_sha256 is None):
            raise ValueError("give exactly one of key_env and key_sha256")
        return self


class KeysFile(BaseModel):
    """A keys file: `keys:` and its entries (also a fleet file's `gateway` section)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    keys: tuple[KeyEntry, ...] = ()

    @model_validator(mode="after")
    def _unique_names(self) -> KeysFile:
        seen: dict[str, int] = {}
        for i, entry in enumerate(self.keys):
            if entry.name in seen:
                raise ValueError(
                    f"keys[{i}].name: '{entry.name}' is already used by keys[{seen[entry.name]}]"
                    "; tenant names must be unique"
                )
            seen[entry.name] = i
        return self


@dataclass(frozen=True)
class Tenant:
    """A resolved entry: the key as its SHA-256, and what it may do."""

    name: str
    key_sha256: str
    models: frozenset[str] | None = None
    """Names or aliases it may use; None: all."""
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None

    def may_use(self, requested: str, resolved: str) -> bool:
        """Listed by the id asked for or by the model it resolves to: an allowed alias
        follows a swap to the new model."""
        return self.models is None or requested in self.models or resolved in self.models

    @property
    def limited(self) -> bool:
        return self.requests_per_minute is not None or self.tokens_per_minute is not None


@dataclass(frozen=True)
class TenantTable:
    """The tenants the endpoint accepts; `version` orders tables (a gateway keeps the
    newest it has seen). An empty table with `open` set leaves the endpoint open."""

    version: int = 0
    tenants: tuple[Tenant, ...] = ()
    source: str = ""
    """Where it was loaded from (the keys file's path, `--api-key`, a fleet file)."""

    @property
    def open(self) -> bool:
        return not self.tenants


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def resolve_entries(
    entries: tuple[KeyEntry, ...], env: Mapping[str, str], *, where: str
) -> tuple[Tenant, ...]:
    """Every entry as a Tenant; an unset or empty `key_env`, an unusable key, or two
    entries with one key is a UserInputError naming the entry (never the key)."""
    tenants: list[Tenant] = []
    owner: dict[str, str] = {}
    for i, entry in enumerate(entries):
        label = f"{where}[{i}] ({entry.name})"
        if entry.key_env is not None:
            key = env.get(entry.key_env, "")
            if not key:
                raise UserInputError(
                    f"{label}.key_env: the environment variable {entry.key_env} is unset or "
                    "empty in this process; export it (or use key_sha256)"
                )
            if not _KEY_CHARS.fullmatch(key):
                raise UserInputError(
                    f"{label}.key_env: {entry.key_env} holds characters other than printable "
                    "ASCII without spaces; an HTTP Bearer token can't carry it"
                )
            digest = key_digest(key)
        else:
            assert entry.key_sha256 is not None  # one of the two, by KeyEntry's validator
            digest = entry.key_sha256
        if digest in owner:
            raise UserInputError(f"{label}: the same key as {owner[digest]}; give each its own")
        owner[digest] = label
        tenants.append(
            Tenant(
                name=entry.name,
                key_sha256=digest,
                models=None if entry.models is None else frozenset(entry.models),
                requests_per_minute=entry.requests_per_minute,
                tokens_per_minute=entry.tokens_per_minute,
            )
        )
    return tuple(tenants)


def table_of(tenants: tuple[Tenant, ...], source: str) -> TenantTable:
    """A table stamped now: a table loaded later replaces it everywhere."""
    return TenantTable(version=time.time_ns(), tenants=tenants, source=source)


def api_key_tenants(keys: tuple[str, ...]) -> tuple[Tenant, ...]:
    """`--api-key`/`SWITCHYARD_API_KEY` keys as tenants `api-key-1`, ...: every model, no
    quota (what those keys always allowed)."""
    return tuple(
        Tenant(name=f"api-key-{i + 1}", key_sha256=key_digest(k)) for i, k in enumerate(keys)
    )


def parse_keys_file(data: Any, *, where: str) -> KeysFile:
    if not isinstance(data, dict):
        raise UserInputError(
            f"{where}: must hold a mapping with `keys:`, got {type(data).__name__}"
        )
    try:
        return KeysFile.model_validate(data)
    except ValidationError as exc:
        raise UserInputError(f"{where}: {validation_line(exc, dotted(''))}") from None


def read_keys_file(path: Path, env: Mapping[str, str]) -> TenantTable:
    """A keys file read, validated and resolved against `env` (nothing is half-loaded)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        detail = " ".join(str(exc).split())
        raise UserInputError(f"--keys: cannot read {path}: {detail}") from None
    keys = parse_keys_file(data, where=str(path))
    return table_of(resolve_entries(keys.keys, env, where=f"{path}: keys"), str(path))
