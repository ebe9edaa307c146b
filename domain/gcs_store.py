"""Where a fault-tolerant head keeps the GCS's tables (`switchyard up --gcs-store`).

Ray's GCS holds the cluster's tables (nodes, actors, placement groups, jobs, the key-value
store) in its own memory unless told to keep them elsewhere; a GCS restarted against the
same store recovers them, and running actors and Serve replicas survive meanwhile
(docs/reliability.md). Parsed once, here, from the flag's text.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from domain.exit_codes import UserInputError

FLAG = "--gcs-store"
ALLOWED = "local, redis://HOST:PORT or rocksdb:PATH"


class GcsStoreKind(StrEnum):
    """Which store keeps the GCS's tables."""

    LOCAL = "local"
    """A `redis-server` Switchyard starts beside the head (Debian's package), its data in
    the state directory: one box, and tests."""
    REDIS = "redis"
    """An operator's Redis (`RAY_REDIS_ADDRESS`), ideally replicated and off the head."""
    ROCKSDB = "rocksdb"
    """Ray's RocksDB store on the head's local disk (`RAY_gcs_storage=rocksdb`)."""


@dataclass(frozen=True)
class GcsStore:
    kind: GcsStoreKind
    host: str = ""
    port: int = 0
    path: Path | None = None

    @property
    def redis_address(self) -> str:
        return f"{self.host}:{self.port}"

    def describe(self) -> str:
        """For `status` and logs; never a password (it is not part of the record)."""
        if self.kind is GcsStoreKind.ROCKSDB:
            return f"rocksdb:{self.path}"
        if self.kind is GcsStoreKind.LOCAL and not self.port:
            return "local"
        prefix = "local redis" if self.kind is GcsStoreKind.LOCAL else "redis"
        return f"{prefix} {self.redis_address}"

    def to_text(self) -> str:
        """What `--gcs-store` reads back as this store (for the state directory's record)."""
        if self.kind is GcsStoreKind.ROCKSDB:
            return f"rocksdb:{self.path}"
        if self.kind is GcsStoreKind.LOCAL:
            return "local"
        return f"redis://{self.redis_address}"


def parse_gcs_store(text: str) -> GcsStore:
    """`--gcs-store`'s value as a typed record; UserInputError naming the value otherwise."""
    value = text.strip()
    if value == "local":
        return GcsStore(GcsStoreKind.LOCAL)
    if value.startswith("rocksdb:"):
        path = value.removeprefix("rocksdb:")
        if not path:
            raise UserInputError(f"{FLAG}: {text!r} names no directory; expected {ALLOWED}")
        return GcsStore(GcsStoreKind.ROCKSDB, path=Path(path).expanduser().resolve())
    if value.startswith("redis://"):
        rest = value.removeprefix("redis://")
        if "@" in rest:
            raise UserInputError(
                f"{FLAG}: {text!r} carries a password; pass it in an environment variable "
                "named by --gcs-store-password-env instead"
            )
        host, sep, port = rest.rstrip("/").rpartition(":")
        if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise UserInputError(f"{FLAG}: {text!r} is not redis://HOST:PORT (PORT 1-65535)")
        return GcsStore(GcsStoreKind.REDIS, host=host.strip("[]"), port=int(port))
    raise UserInputError(f"{FLAG}: {text!r} is not one of {ALLOWED}")
