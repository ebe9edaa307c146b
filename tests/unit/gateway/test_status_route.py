"""`GET /switchyard/v1/status`: the status document for the operator only.

The document shows the inventory and every tenant's usage, so the operator key
(`up --admin-key-env`) opens it and a tenant key never does; a keyless endpoint (loopback
only) leaves it open as it leaves everything open."""

from __future__ import annotations

import hashlib

import pytest

from domain.tenant_keys import Tenant, TenantTable
from tests.unit.gateway.gateway_harness import error_of, serving

pytestmark = pytest.mark.anyio

OPERATOR, TENANT = "op-secret-key", "sk-tenant-key"
PATH = "/switchyard/v1/status"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


TENANTS = TenantTable(version=1, tenants=(Tenant("alice", _digest(TENANT)),), source="keys.yaml")


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_a_keyless_endpoint_serves_the_document_to_anyone() -> None:
    async with serving() as h:
        reply = await h.client.get(PATH)
    assert reply.status_code == 200, reply.text
    assert reply.json()["read_via"] == "gateway" and h.registry.status_reads == 1


async def test_with_an_operator_key_only_that_key_opens_it() -> None:
    async with serving(tenants=TENANTS, admin_key_sha256=_digest(OPERATOR)) as h:
        operator = await h.client.get(PATH, headers=_bearer(OPERATOR))
        tenant = await h.client.get(PATH, headers=_bearer(TENANT))
        nobody = await h.client.get(PATH)
        # The operator key is no tenant key: it does not reach the models.
        models = await h.client.get("/v1/models", headers=_bearer(OPERATOR))
    assert operator.status_code == 200, operator.text
    assert tenant.status_code == nobody.status_code == 401
    assert error_of(tenant)["code"] == "invalid_operator_key"
    assert tenant.headers["www-authenticate"] == "Bearer"
    assert models.status_code == 401
    assert h.registry.status_reads == 1


async def test_an_operator_key_guards_it_on_a_keyless_endpoint_too() -> None:
    async with serving(admin_key_sha256=_digest(OPERATOR)) as h:
        nobody = await h.client.get(PATH)
        operator = await h.client.get(PATH, headers=_bearer(OPERATOR))
        models = await h.client.get("/v1/models")
    assert nobody.status_code == 401 and operator.status_code == 200
    assert models.status_code == 200


async def test_tenant_keys_without_an_operator_key_close_it_and_say_how_to_open_it() -> None:
    async with serving(tenants=TENANTS) as h:
        tenant = await h.client.get(PATH, headers=_bearer(TENANT))
    assert tenant.status_code == 403
    error = error_of(tenant)
    assert error["code"] == "operator_key_not_configured"
    assert "--admin-key-env" in error["message"]
    assert h.registry.status_reads == 0
