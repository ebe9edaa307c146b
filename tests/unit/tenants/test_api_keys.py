"""Bearer-token check: any configured key is accepted, as the tenant it belongs to."""

from __future__ import annotations

import pytest

from domain.tenant_keys import TenantTable, api_key_tenants, table_of
from serve_apps.tenants.tenant_gate import OPEN, TenantGate


def _gate(*keys: str) -> TenantGate:
    return TenantGate(table_of(api_key_tenants(keys), "--api-key") if keys else TenantTable())


@pytest.mark.parametrize("authorization", [None, "", "Bearer x", "Basic abc"])
def test_without_keys_everything_is_allowed(authorization: str | None) -> None:
    gate = _gate()
    assert not gate.enabled
    assert gate.authenticate(authorization) is OPEN


def test_any_of_several_keys_is_accepted_as_its_own_tenant() -> None:
    gate = _gate("alpha-key", "beta-key", "gamma-key")
    assert gate.enabled
    names = [gate.authenticate(f"Bearer {k}") for k in ("alpha-key", "beta-key", "gamma-key")]
    assert [t.name for t in names if t is not None] == ["api-key-1", "api-key-2", "api-key-3"]


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Bearer wrong",
        "Bearer alpha",
        "Bearer alpha-keyX",
        "alpha-key",
        "Basic alpha-key",
        "Token alpha-key",
    ],
)
def test_missing_wrong_or_non_bearer_credentials_are_refused(authorization: str | None) -> None:
    assert _gate("alpha-key", "beta-key").authenticate(authorization) is None


def test_whitespace_around_the_token_is_ignored() -> None:
    assert _gate("alpha-key").authenticate("Bearer  alpha-key ") is not None


def test_non_ascii_keys_are_compared_as_utf8() -> None:
    assert _gate("cl\u00e9-secr\u00e8te").authenticate("Bearer cl\u00e9-secr\u00e8te") is not None
    assert _gate("cl\u00e9-secr\u00e8te").authenticate("Bearer cle-secrete") is None


def test_a_newer_table_replaces_the_keys_and_an_older_one_is_ignored() -> None:
    gate = _gate("old-key")
    newer = table_of(api_key_tenants(("new-key",)), "reload")
    assert gate.offer(newer)
    assert gate.authenticate("Bearer new-key") is not None
    assert gate.authenticate("Bearer old-key") is None
    assert not gate.offer(TenantTable(version=1, tenants=api_key_tenants(("old-key",))))
    assert gate.authenticate("Bearer old-key") is None
