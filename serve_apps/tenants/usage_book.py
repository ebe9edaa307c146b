"""The cluster-wide tally of tenant usage, kept by the fleet registry.

Each gateway replica sends what it counted since its last exchange (`TenantGate.take_delta`)
and gets back the other replicas' windows, so every replica decides on the cluster's total
(`tenant_gate.py`). The same tally answers `status`'s top users. Plain class, no Ray.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from serve_apps.tenants.tenant_gate import UsageDelta
from serve_apps.tenants.usage_window import UsageWindow, merged


@dataclass
class _Tally:
    requests: UsageWindow = field(default_factory=UsageWindow)
    tokens: UsageWindow = field(default_factory=UsageWindow)
    rejections: UsageWindow = field(default_factory=UsageWindow)


@dataclass(frozen=True)
class TenantUsage:
    """One tenant over the last 60 s, all gateway replicas together."""

    name: str
    requests: int
    tokens: int
    rejections: int

    def to_json(self) -> dict[str, int | str]:
        return {
            "name": self.name,
            "requests": self.requests,
            "tokens": self.tokens,
            "rejections": self.rejections,
        }


class TenantUsageBook:
    def __init__(self) -> None:
        # replica -> tenant name -> tally
        self._by_replica: dict[str, dict[str, _Tally]] = {}

    def exchange(
        self, replica: str, delta: UsageDelta, now: float
    ) -> dict[str, dict[str, dict[int, int]]]:
        """Record `replica`'s delta; return the other replicas' windows per tenant."""
        mine = self._by_replica.setdefault(replica, {})
        for name, rows in delta.items():
            tally = mine.setdefault(name, _Tally())
            for second, requests, tokens, rejections in rows:
                tally.requests.add(second, requests)
                tally.tokens.add(second, tokens)
                tally.rejections.add(second, rejections)
        self._forget_idle(now)
        others: dict[str, dict[str, dict[int, int]]] = {}
        for other, tallies in self._by_replica.items():
            if other == replica:
                continue
            for name, tally in tallies.items():
                entry = others.setdefault(name, {"requests": {}, "tokens": {}})
                entry["requests"] = merged(entry["requests"], tally.requests.seconds(now))
                entry["tokens"] = merged(entry["tokens"], tally.tokens.seconds(now))
        return others

    def top(self, now: float, limit: int = 10) -> list[TenantUsage]:
        """The tenants with the most requests in the last 60 s (then tokens, then name)."""
        totals: dict[str, list[int]] = {}
        for tallies in self._by_replica.values():
            for name, tally in tallies.items():
                row = totals.setdefault(name, [0, 0, 0])
                row[0] += tally.requests.total(now)
                row[1] += tally.tokens.total(now)
                row[2] += tally.rejections.total(now)
        ranked = sorted(totals.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
        return [TenantUsage(name, r, t, x) for name, (r, t, x) in ranked if r or t or x][:limit]

    def _forget_idle(self, now: float) -> None:
        """Drop tallies whose window emptied (a gone replica, a tenant gone quiet)."""
        for replica in list(self._by_replica):
            tallies = self._by_replica[replica]
            for name in [n for n, t in tallies.items() if not _live(t, now)]:
                del tallies[name]
            if not tallies:
                del self._by_replica[replica]


def _live(tally: _Tally, now: float) -> bool:
    return bool(tally.requests.total(now) or tally.tokens.total(now) or tally.rejections.total(now))
