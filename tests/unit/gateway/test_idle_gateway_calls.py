"""An idle gateway replica keeps its calls to the registry few: in-flight counts go out when
they change (within one report period) and otherwise once a heartbeat, and the tenant
exchange is skipped when there is nothing to send and no quota needs the others' counts."""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from typing import Any

import pytest

from domain.tenant_keys import Tenant, TenantTable
from serve_apps.gateway import in_flight_report
from serve_apps.gateway.gateway_metrics import RecordingGatewayMetrics
from serve_apps.gateway.in_flight_report import InFlightReporter
from serve_apps.registry.route_view import RouteView
from serve_apps.registry.routing_table import RoutingTable
from serve_apps.tenants.tenant_gate import TenantGate
from serve_apps.tenants.tenant_sync import TenantSync

pytestmark = pytest.mark.anyio


async def _no_table(known: RoutingTable, timeout_s: float) -> RoutingTable:
    raise AssertionError("the reporter only reads the view's table")


async def test_unchanged_counts_go_out_once_a_heartbeat_and_a_change_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(in_flight_report, "_REPORT_PERIOD_S", 0.01)
    monkeypatch.setattr(in_flight_report, "_HEARTBEAT_S", 0.2)
    reports: list[dict[str, int]] = []

    async def report(
        replica: str, version: int, counts: dict[str, int], started: dict[str, int]
    ) -> None:
        reports.append(counts)

    in_flight: Counter[str] = Counter()
    reporter = InFlightReporter(
        in_flight,
        in_flight,
        {},
        RouteView(_no_table),
        RecordingGatewayMetrics(),
        report,
    )
    reporter.start()
    await asyncio.sleep(0.3)  # 30 periods, nothing changing
    idle = len(reports)
    in_flight["app"] = 1
    await asyncio.sleep(0.05)
    await reporter.stop()
    assert 1 <= idle <= 3
    assert reports[-1] == {"app": 1}


def _gate(**quota: Any) -> TenantGate:
    digest = hashlib.sha256(b"sk-x").hexdigest()
    return TenantGate(TenantTable(version=1, tenants=(Tenant("x", digest, **quota),)))


@pytest.mark.parametrize(("quota", "exchanges"), [({}, 0), ({"requests_per_minute": 10}, 1)])
async def test_an_idle_exchange_is_skipped_unless_a_quota_needs_the_others_counts(
    quota: dict[str, Any], exchanges: int
) -> None:
    calls: list[Any] = []

    async def fetch(known: int) -> TenantTable | None:
        return None

    async def exchange(replica: str, delta: Any) -> dict[str, Any]:
        calls.append(delta)
        return {}

    await TenantSync(_gate(**quota), fetch, exchange, period_s=1.0).round()
    assert len(calls) == exchanges
