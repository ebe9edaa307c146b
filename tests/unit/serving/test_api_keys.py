"""Bearer-token check: any configured key is accepted, compared in constant time."""

from __future__ import annotations

import hmac

import pytest
from pydantic import SecretStr

from serve_apps.api_keys import ApiKeyCheck


def _check(*keys: str) -> ApiKeyCheck:
    return ApiKeyCheck(tuple(SecretStr(k) for k in keys))


@pytest.mark.parametrize("authorization", [None, "", "Bearer x", "Basic abc"])
def test_without_keys_everything_is_allowed(authorization: str | None) -> None:
    check = _check()
    assert not check.enabled
    assert check.allows(authorization)


def test_any_of_several_keys_is_accepted() -> None:
    check = _check("alpha-key", "beta-key", "gamma-key")
    assert check.enabled
    for key in ("alpha-key", "beta-key", "gamma-key"):
        assert check.allows(f"Bearer {key}")


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
    assert not _check("alpha-key", "beta-key").allows(authorization)


def test_whitespace_around_the_token_is_ignored() -> None:
    assert _check("alpha-key").allows("Bearer  alpha-key ")


def test_non_ascii_keys_are_compared_as_utf8() -> None:
    assert _check("cl\u00e9-secr\u00e8te").allows("Bearer cl\u00e9-secr\u00e8te")
    assert not _check("cl\u00e9-secr\u00e8te").allows("Bearer cle-secrete")


def test_every_key_is_compared_even_when_the_first_matches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compared: list[bytes] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        compared.append(b)
        return real(a, b)

    monkeypatch.setattr("serve_apps.api_keys.hmac.compare_digest", counting)
    check = _check("k1", "k2", "k3")
    assert check.allows("Bearer k1")
    assert compared == [b"k1", b"k2", b"k3"]
    compared.clear()
    assert not check.allows("Bearer nope")
    assert compared == [b"k1", b"k2", b"k3"]
