"""Tenant quotas: sliding 60 s windows per key, shared by every gateway replica through the
registry's usage book, with OpenAI's 429 and an honest Retry-After."""

from __future__ import annotations

from domain.tenant_keys import Tenant, TenantTable
from serve_apps.gateway.openai_errors import GatewayError
from serve_apps.tenants.tenant_gate import TenantGate
from serve_apps.tenants.usage_book import TenantUsageBook
from serve_apps.tenants.usage_window import UsageWindow, retry_after_s


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _gate(tenant: Tenant, clock: Clock) -> TenantGate:
    return TenantGate(TenantTable(version=1, tenants=(tenant,)), clock)


def _refusal(gate: TenantGate, tenant: Tenant) -> GatewayError:
    try:
        gate.admit(tenant)
    except GatewayError as error:
        return error
    raise AssertionError("admitted")


def test_a_window_forgets_what_is_older_than_60_s() -> None:
    window = UsageWindow()
    window.add(100.0, 3)
    window.add(130.5, 2)
    assert window.total(159.9) == 5
    assert window.total(160.0) == 2  # second 100 left the window
    assert window.total(191.0) == 0


def test_retry_after_is_when_enough_of_the_window_has_expired() -> None:
    counts = {100: 1, 110: 1, 120: 1}
    assert retry_after_s(counts, limit=3, now=125.0) == 35  # second 100 leaves at 160
    assert retry_after_s(counts, limit=2, now=125.0) == 45  # 100 and 110 must both leave
    assert retry_after_s({100: 1}, limit=1, now=159.6) == 1  # never 0


def test_requests_over_the_minute_are_refused_with_openais_429() -> None:
    clock = Clock()
    tenant = Tenant("alice", "0" * 64, requests_per_minute=2)
    gate = _gate(tenant, clock)
    gate.admit(tenant)
    clock.now += 10
    gate.admit(tenant)
    error = _refusal(gate, tenant)
    assert error.status == 429 and error.code == "rate_limit_exceeded"
    assert error.body()["error"]["type"] == "requests"
    assert error.retry_after_s == 50  # the first request leaves the window in 50 s
    clock.now += 50
    gate.admit(tenant)  # the window slid


def test_tokens_are_charged_when_a_response_ends() -> None:
    clock = Clock()
    tenant = Tenant("bob", "1" * 64, tokens_per_minute=100)
    gate = _gate(tenant, clock)
    gate.admit(tenant)
    gate.admit(tenant)  # nothing has finished: nothing charged yet
    gate.used_tokens("bob", 100)
    error = _refusal(gate, tenant)
    assert error.body()["error"]["type"] == "tokens" and "limit 100, used 100" in error.message


def test_an_unlimited_key_is_never_refused_but_still_counted() -> None:
    tenant = Tenant("carol", "2" * 64)
    gate = _gate(tenant, Clock())
    for _ in range(1000):
        gate.admit(tenant)
    assert gate.take_delta()["carol"][0][1] == 1000


def test_replicas_together_keep_the_limit_after_one_exchange() -> None:
    clock = Clock()
    tenant = Tenant("alice", "0" * 64, requests_per_minute=4)
    book = TenantUsageBook()
    one, two = _gate(tenant, clock), _gate(tenant, clock)
    one.admit(tenant)
    one.admit(tenant)
    two.admit(tenant)
    two.admit(tenant)
    for name, gate in (("one", one), ("two", two), ("one", one)):
        gate.set_remote(book.exchange(name, gate.take_delta(), clock.now))
    # Each replica admitted 2 of 4; both now know the key has used all 4.
    assert _refusal(one, tenant).status == 429
    assert _refusal(two, tenant).status == 429
    for name, gate in (("one", one), ("two", two)):
        gate.set_remote(book.exchange(name, gate.take_delta(), clock.now))
    top = book.top(clock.now)
    assert [(u.name, u.requests, u.rejections) for u in top] == [("alice", 4, 2)]


def test_a_failed_exchange_keeps_the_counts_for_the_next() -> None:
    tenant = Tenant("alice", "0" * 64)
    gate = _gate(tenant, Clock())
    gate.admit(tenant)
    delta = gate.take_delta()
    gate.restore_delta(delta)
    gate.admit(tenant)
    assert sum(row[1] for row in gate.take_delta()["alice"]) == 2


def test_the_book_forgets_replicas_whose_window_emptied() -> None:
    book = TenantUsageBook()
    book.exchange("gone", {"alice": [(1000, 3, 0, 0)]}, 1000.0)
    assert book.exchange("live", {}, 1030.0)["alice"]["requests"] == {1000: 3}
    assert book.exchange("live", {}, 1061.0) == {}
    assert book.top(1061.0) == []
