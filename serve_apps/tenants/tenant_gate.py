"""Who is calling, may they use this model, and are they within their quota.

A plain class, one per gateway replica, fed the tenant table (`domain/tenant_keys.py`) and,
once a second, the other replicas' usage (`tenant_sync.py`). Quotas are sliding 60 s
windows kept per second: a request counts when it is admitted, its tokens (prompt +
generated, from the engine's usage report) when its answer ends. A replica decides on its
own counts plus the others' as of the last exchange, so no request waits on a Ray call; the
price is that a count reaches the other replicas within two exchange periods
(`quota_sync_s`, 1 s by default: one to send, one to fetch), and replicas can together
overshoot a limit by what they admit in that time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from domain.tenant_keys import Tenant, TenantTable, key_digest
from serve_apps.gateway.http_errors import model_not_found
from serve_apps.gateway.openai_errors import GatewayError
from serve_apps.tenants.usage_window import UsageWindow, merged, retry_after_s, window_total

OPEN = Tenant(name="", key_sha256="")
"""The caller of an endpoint without keys: every model, no quota, no per-key metrics."""


class Rejection(StrEnum):
    """Why a tenant's request was refused (the `reason` label of the rejection counter)."""

    INVALID_KEY = "invalid_key"
    """No key, or one no tenant has (401; counted under key name `-`)."""
    MODEL_NOT_ALLOWED = "model_not_allowed"
    """The key may not use the model it asked for (404, as OpenAI answers)."""
    REQUESTS_PER_MINUTE = "requests_per_minute"
    TOKENS_PER_MINUTE = "tokens_per_minute"


UsageDelta = dict[str, list[tuple[int, int, int, int]]]
"""Per tenant name: (second, requests, tokens, rejections) this replica added since its
last exchange."""
RemoteUsage = Mapping[str, Mapping[str, Mapping[int, int]]]
"""Per tenant name, the other replicas' `requests` and `tokens` windows, by second."""


@dataclass
class _Local:
    requests: UsageWindow = field(default_factory=UsageWindow)
    tokens: UsageWindow = field(default_factory=UsageWindow)


class TenantGate:
    def __init__(self, table: TenantTable, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._table = table
        self._digests = _digests(table)
        self._local: dict[str, _Local] = {}
        self._remote: RemoteUsage = {}
        self._pending: dict[str, dict[int, list[int]]] = {}
        self.on_reject: Callable[[str, str], None] = lambda key, reason: None
        """Told of every refusal (the gateway's per-key rejection counter)."""

    @property
    def table(self) -> TenantTable:
        return self._table

    @property
    def enabled(self) -> bool:
        return not self._table.open

    @property
    def has_quotas(self) -> bool:
        """Whether any tenant has a requests or tokens quota."""
        return any(
            t.requests_per_minute is not None or t.tokens_per_minute is not None
            for t in self.table.tenants
        )

    def offer(self, table: TenantTable) -> bool:
        """Take `table` if it is newer than the one in use (a reload); True if taken."""
        if table.version <= self._table.version:
            return False
        self._table = table
        self._digests = _digests(table)
        return True

    # ---------------------------------------------------------------- decisions
    def authenticate(self, authorization: str | None) -> Tenant | None:
        """The tenant whose key is the bearer token; OPEN when no keys are set; else None.

        Looked up by the offered token's SHA-256, one hash lookup whatever the number of
        keys: what a lookup's time could tell is about the digest, and a digest tells
        nothing about the key (that is what a preimage-resistant hash is for)."""
        if self._table.open:
            return OPEN
        if not authorization or not authorization.startswith("Bearer "):
            return None
        return self._digests.get(key_digest(authorization[len("Bearer ") :].strip()))

    def check_model(self, tenant: Tenant, requested: str, resolved: str) -> None:
        if not tenant.may_use(requested, resolved):
            self.rejected(tenant, Rejection.MODEL_NOT_ALLOWED)
            # As OpenAI answers a model the key has no access to: it does not exist for you.
            raise model_not_found(requested)

    def admit(self, tenant: Tenant) -> None:
        """Count a request against `tenant`'s quotas, or raise 429 if either is used up."""
        if not tenant.limited:
            self._count(tenant.name, requests=1)
            return
        now = self._clock()
        local = self._local.setdefault(tenant.name, _Local())
        remote = self._remote.get(tenant.name, {})
        checks = (
            (Rejection.REQUESTS_PER_MINUTE, tenant.requests_per_minute, local.requests, "requests"),
            (Rejection.TOKENS_PER_MINUTE, tenant.tokens_per_minute, local.tokens, "tokens"),
        )
        for reason, limit, window, kind in checks:
            if limit is None:
                continue
            counts = merged(window.seconds(now), remote.get(kind, {}))
            used = window_total(counts, now)
            if used >= limit:
                self.rejected(tenant, reason)
                wait = retry_after_s(counts, limit, now)
                raise GatewayError(
                    429,
                    f"Rate limit reached for key '{tenant.name}' on {kind} per minute: "
                    f"limit {limit}, used {used}. Try again in {wait} s.",
                    code="rate_limit_exceeded",
                    retry_after_s=wait,
                    error_type=kind,
                )
        self._count(tenant.name, requests=1)

    # ---------------------------------------------------------------- accounting
    def used_tokens(self, name: str, tokens: int) -> None:
        """A response of tenant `name` ended having used `tokens` (prompt + generated)."""
        if name and tokens > 0:
            self._count(name, tokens=tokens)

    def rejected(self, tenant: Tenant, reason: Rejection) -> None:
        if tenant.name:
            self.on_reject(tenant.name, reason.value)
            self._count(tenant.name, rejections=1)

    def _count(self, name: str, *, requests: int = 0, tokens: int = 0, rejections: int = 0) -> None:
        if not name:
            return
        now = self._clock()
        local = self._local.setdefault(name, _Local())
        local.requests.add(now, requests)
        local.tokens.add(now, tokens)
        row = self._pending.setdefault(name, {}).setdefault(int(now), [0, 0, 0])
        row[0] += requests
        row[1] += tokens
        row[2] += rejections

    # ---------------------------------------------------------------- exchange
    def take_delta(self) -> UsageDelta:
        """What this replica counted since the last call, for the registry."""
        pending, self._pending = self._pending, {}
        return {
            name: [(s, r, t, x) for s, (r, t, x) in sorted(rows.items())]
            for name, rows in pending.items()
        }

    def restore_delta(self, delta: UsageDelta) -> None:
        """Put back a delta the registry never got (the exchange failed)."""
        for name, rows in delta.items():
            mine = self._pending.setdefault(name, {})
            for second, r, t, x in rows:
                row = mine.setdefault(second, [0, 0, 0])
                row[0] += r
                row[1] += t
                row[2] += x

    def set_remote(self, remote: RemoteUsage) -> None:
        self._remote = remote


def _digests(table: TenantTable) -> dict[str, Tenant]:
    return {t.key_sha256.lower(): t for t in table.tenants}
