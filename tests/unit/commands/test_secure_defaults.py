"""Secure defaults: everything binds to loopback unless told otherwise, and binding beyond
this machine needs both an API key on the endpoint and Ray token auth on the cluster.

(The real stack's listening sockets are checked in tests/integration/test_secure_defaults.py.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from domain.tenant_keys import api_key_tenants, key_digest, table_of
from serve_apps.tenants.tenant_gate import TenantGate
from switchyard.cli import main
from switchyard.commands import up
from switchyard.stack_config import StackConfig


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("SWITCHYARD_API_KEY", "RAY_ADDRESS", "RAY_AUTH_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SWITCHYARD_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("cluster.inventory.gpu_presence.has_nvidia_gpu", lambda: False)


def _config(**fields: Any) -> StackConfig:
    return StackConfig.model_validate(fields)


def _refusal(**fields: Any) -> str:
    with pytest.raises(ValidationError) as info:
        _config(**fields)
    return str(info.value.errors()[0]["msg"])


def test_the_endpoint_dashboard_job_api_and_ray_node_default_to_loopback() -> None:
    config = _config()
    assert config.host == "127.0.0.1"
    # The job API is served by the dashboard; the node address is where Ray's own
    # servers (GCS, raylet, object manager) are reached.
    assert config.local_head.dashboard_host == "127.0.0.1"
    assert config.local_head.node_ip_address == "127.0.0.1"
    assert config.effective_ray_auth_mode == "token"


def test_up_without_flags_builds_the_loopback_config() -> None:
    config = up.build_config(up_args())
    assert (config.host, config.local_head.dashboard_host) == ("127.0.0.1", "127.0.0.1")
    assert config.ray_auth_mode is None
    assert config.effective_ray_auth_mode == "token"


def up_args(*flags: str) -> Any:
    from switchyard.cli import build_parser

    return build_parser().parse_args(["up", *flags])


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "my-host.example"])
def test_a_non_loopback_endpoint_without_an_api_key_is_refused(host: str) -> None:
    message = _refusal(host=host)
    assert f"host={host!r}" in message
    assert "without an API key" in message
    assert "--api-key" in message


@pytest.mark.parametrize("mode", ["disabled", "k8s"])
def test_a_non_loopback_endpoint_without_ray_token_auth_is_refused(mode: str) -> None:
    message = _refusal(host="0.0.0.0", gateway={"api_keys": ["k"]}, ray_auth_mode=mode)
    assert "host='0.0.0.0'" in message
    assert f"RAY_AUTH_MODE={mode}" in message
    assert "set RAY_AUTH_MODE=token" in message


def test_joining_a_cluster_without_token_auth_refuses_a_non_loopback_endpoint() -> None:
    message = _refusal(host="0.0.0.0", gateway={"api_keys": ["k"]}, address="10.0.0.1:6379")
    assert "RAY_AUTH_MODE=disabled" in message


@pytest.mark.parametrize(
    "local_head", [{"dashboard_host": "0.0.0.0"}, {"node_ip_address": "192.0.2.10"}]
)
def test_a_non_loopback_dashboard_or_node_without_token_auth_is_refused(
    local_head: dict[str, str],
) -> None:
    message = _refusal(local_head=local_head, ray_auth_mode="disabled")
    field = next(iter(local_head))
    assert f"local_head.{field}=" in message


def test_a_non_loopback_endpoint_with_a_key_and_token_auth_is_accepted() -> None:
    for mode in (None, "token"):
        config = _config(host="0.0.0.0", gateway={"api_keys": ["k"]}, ray_auth_mode=mode)
        assert config.effective_ray_auth_mode == "token"
    joined = _config(
        host="0.0.0.0", gateway={"api_keys": ["k"]}, address="10.0.0.1:6379", ray_auth_mode="token"
    )
    assert joined.host == "0.0.0.0"


def test_loopback_needs_neither_key_nor_token_auth() -> None:
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert _config(host=host, ray_auth_mode="disabled").host == host


def test_up_refuses_0000_with_ray_auth_disabled_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")

    def no_stack(*_: Any, **__: Any) -> Any:
        raise AssertionError("a refused config must not start anything")

    monkeypatch.setattr("switchyard.stack.Stack", no_stack)
    code = main(["up", "--host", "0.0.0.0", "--api-key", "sk-secret-value"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "RAY_AUTH_MODE=disabled" in err
    assert "sk-secret-value" not in err


def test_up_accepts_0000_with_a_key_and_token_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    config = up.build_config(up_args("--host", "0.0.0.0", "--api-key", "k"))
    assert config.host == "0.0.0.0"
    assert config.endpoint.startswith("http://127.0.0.1:")


# ---------------------------------------------------------------- keys by digest


@pytest.mark.parametrize("offered", ["k", "key-of-the-same-len", "a-much-longer-offered-key-value"])
def test_an_offered_key_is_hashed_once_and_looked_up_by_its_digest_among_any_number_of_keys(
    monkeypatch: pytest.MonkeyPatch, offered: str
) -> None:
    # The gate holds SHA-256 digests only and never compares the key as given: its digest is
    # one dictionary lookup, whatever the number of keys (a lookup's time tells about the
    # digest, and a digest tells nothing about the key).
    hashed: list[str] = []
    real = key_digest

    def recording(key: str) -> str:
        hashed.append(key)
        return real(key)

    keys = ("key-of-the-same-len", *(f"tenant-{i}" for i in range(10_000)))
    gate = TenantGate(table_of(api_key_tenants(keys), "--api-key"))
    monkeypatch.setattr("serve_apps.tenants.tenant_gate.key_digest", recording)
    tenant = gate.authenticate(f"Bearer {offered}")
    assert (tenant is not None) == (offered in keys)
    assert hashed == [offered]
