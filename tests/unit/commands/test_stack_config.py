"""`switchyard up`'s validated config: exposure needs a key, names and aliases are unique."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from switchyard.stack_config import StackConfig, default_name_for, is_loopback


def _model(name: str, *aliases: str) -> dict[str, Any]:
    return {"name": name, "source": f"org/{name}", "aliases": list(aliases)}


def _stack(**fields: Any) -> StackConfig:
    return StackConfig.model_validate(fields)


def _refusal(**fields: Any) -> str:
    with pytest.raises(ValidationError) as info:
        _stack(**fields)
    return str(info.value)


def test_defaults_listen_on_loopback_without_a_key() -> None:
    config = _stack()
    assert config.host == "127.0.0.1"
    assert config.endpoint == "http://127.0.0.1:8000"
    assert config.gateway.api_keys == ()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "10.0.0.1", "gpu-head"])
def test_a_non_loopback_host_without_an_api_key_is_refused(host: str) -> None:
    message = _refusal(host=host)
    assert f"host={host!r} exposes the endpoint beyond this machine" in message
    assert "--api-key" in message


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5"])
def test_a_non_loopback_host_with_an_api_key_is_accepted(host: str) -> None:
    config = _stack(host=host, gateway={"api_keys": ["k"]})
    assert config.gateway.api_keys[0].get_secret_value() == "k"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1"])
def test_loopback_hosts_need_no_key(host: str) -> None:
    assert _stack(host=host).host == host


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("127.9.9.9", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("example.com", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_duplicate_model_names_are_refused() -> None:
    message = _refusal(models=[_model("a"), _model("b"), _model("a")])
    assert "names ['a'] appear more than once" in message


def test_an_alias_on_two_models_is_refused() -> None:
    message = _refusal(models=[_model("a", "default"), _model("b", "default")])
    assert "aliases: ['default'] name more than one model" in message


def test_an_alias_equal_to_a_model_name_is_refused() -> None:
    message = _refusal(models=[_model("a"), _model("b", "a")])
    assert "aliases: ['a']" in message


def test_distinct_names_and_aliases_are_accepted() -> None:
    config = _stack(models=[_model("a", "default", "fast"), _model("b", "big")])
    assert [m.name for m in config.models] == ["a", "b"]


@pytest.mark.parametrize(
    ("host", "endpoint"),
    [
        ("0.0.0.0", "http://127.0.0.1:9000"),
        ("::", "http://127.0.0.1:9000"),
        ("10.1.2.3", "http://10.1.2.3:9000"),
        ("::1", "http://[::1]:9000"),
    ],
)
def test_endpoint_is_a_url_a_client_on_this_machine_can_use(host: str, endpoint: str) -> None:
    assert _stack(host=host, port=9000, gateway={"api_keys": ["k"]}).endpoint == endpoint


@pytest.mark.parametrize("port", [0, 65536])
def test_out_of_range_ports_are_refused(port: int) -> None:
    assert "port" in _refusal(port=port)


def test_unknown_fields_are_refused() -> None:
    assert "hots" in _refusal(hots="0.0.0.0")


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("miniature:kimi-k2.5", "mini-kimi-k2.5"),
        ("moonshotai/Kimi-K2.5", "kimi-k2.5"),
        ("Qwen/Qwen3-8B@abc123", "qwen3-8b"),
        ("/models/Llama-3/", "llama-3"),
        ("relative-dir", "relative-dir"),
    ],
)
def test_default_name_for_a_source(source: str, name: str) -> None:
    assert default_name_for(source) == name
