"""Tenants at the gateway, over ASGI: each key reaches only its models (an allowed alias
follows a swap), hits its quotas with OpenAI's 429, sees only its models listed, takes a
reloaded table without a restart, and is measured by name, never by key."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any

import pytest

from domain.tenant_keys import Tenant, TenantTable
from serve_apps.gateway.gateway_metrics import RecordingGatewayMetrics
from tests.support.openai_schema import schema_errors
from tests.unit.gateway.gateway_harness import (
    CHAT,
    FakeResponse,
    error_of,
    route,
    serving,
    table_of,
    yields,
)

pytestmark = pytest.mark.anyio

ALICE, BOB, CAROL = "sk-alice-secret", "sk-bob-secret", "sk-carol-secret"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


TENANTS = TenantTable(
    version=1,
    tenants=(
        Tenant("alice", _digest(ALICE), frozenset({"default"}), requests_per_minute=2),
        Tenant("bob", _digest(BOB), tokens_per_minute=10),
        Tenant("carol", _digest(CAROL), frozenset()),
    ),
    source="keys.yaml",
)
TABLE = table_of(route("m1"), route("m2"), aliases={"default": "m1"})


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _chat(model: str) -> dict[str, Any]:
    return {**CHAT, "model": model}


async def test_a_key_reaches_its_alias_but_not_other_models() -> None:
    async with serving(TABLE, tenants=TENANTS) as h:
        allowed = await h.chat(_chat("default"), headers=_auth(ALICE))
        by_name = await h.chat(_chat("m2"), headers=_auth(ALICE))
    assert allowed.status_code == 200
    assert by_name.status_code == 404
    assert error_of(by_name)["code"] == "model_not_found"
    assert schema_errors("ErrorResponse", by_name.json()) == []


async def test_an_allowed_alias_follows_a_swap() -> None:
    async with serving(TABLE, tenants=TENANTS) as h:
        h.registry.publish(table_of(route("m1"), route("m2"), aliases={"default": "m2"}, version=2))
        await asyncio.sleep(0.05)
        response = await h.chat(_chat("default"), headers=_auth(ALICE))
    assert response.status_code == 200
    assert h.backend.calls[-1][0].name == "m2"


async def test_models_lists_only_what_the_key_may_use() -> None:
    async with serving(TABLE, tenants=TENANTS) as h:
        alice = (await h.client.get("/v1/models", headers=_auth(ALICE))).json()
        carol = (await h.client.get("/v1/models", headers=_auth(CAROL))).json()
        bob = (await h.client.get("/v1/models", headers=_auth(BOB))).json()
        hidden = await h.client.get("/v1/models/m2", headers=_auth(ALICE))
    assert [m["id"] for m in alice["data"]] == ["default"]
    assert carol["data"] == []
    assert {m["id"] for m in bob["data"]} == {"m1", "m2", "default"}
    assert hidden.status_code == 404


async def test_a_key_with_no_models_is_refused_everything() -> None:
    async with serving(TABLE, tenants=TENANTS) as h:
        response = await h.chat(_chat("default"), headers=_auth(CAROL))
    assert response.status_code == 404


async def test_the_third_request_in_a_minute_is_a_429_with_retry_after() -> None:
    async with serving(TABLE, tenants=TENANTS) as h:
        first = await h.chat(_chat("default"), headers=_auth(ALICE))
        second = await h.chat(_chat("default"), headers=_auth(ALICE))
        third = await h.chat(_chat("default"), headers=_auth(ALICE))
    assert (first.status_code, second.status_code, third.status_code) == (200, 200, 429)
    assert error_of(third)["code"] == "rate_limit_exceeded"
    assert int(third.headers["retry-after"]) >= 1
    assert schema_errors("ErrorResponse", third.json()) == []
    assert len(h.backend.calls) == 2  # the refused one never reached an engine


async def test_tokens_from_the_engines_usage_count_against_the_token_quota() -> None:
    used = FakeResponse(
        {"object": "chat.completion", "usage": {"prompt_tokens": 6, "completion_tokens": 4}}
    )
    async with serving(TABLE, tenants=TENANTS, script=yields(used)) as h:
        first = await h.chat(_chat("m1"), headers=_auth(BOB))
        second = await h.chat(_chat("m1"), headers=_auth(BOB))
    assert first.status_code == 200
    assert second.status_code == 429 and "tokens" in error_of(second)["message"]


async def test_a_reloaded_table_replaces_the_keys_without_a_restart() -> None:
    dave = "sk-dave-secret"
    newer = TenantTable(version=2, tenants=(Tenant("dave", _digest(dave)),), source="reload")

    async def fetch(known: int) -> TenantTable | None:
        return newer if known < newer.version else None

    async def exchange(replica: str, delta: Any) -> dict[str, Any]:
        return {}

    async with serving(
        TABLE, tenants=TENANTS, tenant_sync=(fetch, exchange), quota_sync_s=0.01
    ) as h:
        await asyncio.sleep(0.1)
        old = await h.chat(_chat("m1"), headers=_auth(BOB))
        new = await h.chat(_chat("m1"), headers=_auth(dave))
    assert old.status_code == 401 and new.status_code == 200


async def test_metrics_and_logs_name_the_tenant_never_the_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    metrics = RecordingGatewayMetrics()
    async with serving(TABLE, tenants=TENANTS, metrics=metrics) as h:
        await h.chat(_chat("default"), headers=_auth(ALICE))
        await h.chat(_chat("m2"), headers=_auth(ALICE))
        await h.chat(_chat("m1"), headers=_auth("sk-unknown-secret"))
        recorded = (
            repr(metrics) + repr(h.gateway.tenants.table) + repr(h.gateway.tenants.take_delta())
        )
    assert [r.tenant for r in metrics.requests if r.status_code == 200] == ["alice"]
    assert ("alice", "model_not_allowed") in metrics.rejections
    assert ("-", "invalid_key") in metrics.rejections
    for key in (ALICE, "sk-unknown-secret"):
        assert key not in recorded and key not in caplog.text


async def test_an_endpoint_with_api_keys_names_them_api_key_n() -> None:
    metrics = RecordingGatewayMetrics()
    async with serving(TABLE, api_keys=["k1", "k2"], metrics=metrics) as h:
        await h.chat(_chat("m1"), headers=_auth("k2"))
    assert metrics.requests[-1].tenant == "api-key-2"
