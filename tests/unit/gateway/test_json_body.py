"""A request body becomes a JSON object, or a 400 whose message says what is wrong."""

from __future__ import annotations

import pytest

from serve_apps.gateway.json_body import parse_json_object
from serve_apps.gateway.openai_errors import GatewayError


def _refusal(raw: bytes) -> GatewayError:
    with pytest.raises(GatewayError) as info:
        parse_json_object(raw)
    assert info.value.status == 400
    return info.value


def test_a_json_object_is_returned_as_a_dict() -> None:
    assert parse_json_object(b'{"model": "a", "n": 1}') == {"model": "a", "n": 1}


def test_a_utf8_bom_is_allowed_as_json_loads_on_bytes_allows_it() -> None:
    assert parse_json_object(b'\xef\xbb\xbf{"model": "a"}') == {"model": "a"}


@pytest.mark.parametrize(
    "raw",
    [b'{"model": "\xff"}', b'{"model": "\xed\xa0\x80"}', '{"m": 1}'.encode("utf-16")],
    ids=["invalid byte", "utf-8 encoded surrogate", "utf-16"],
)
def test_anything_but_strict_utf8_is_refused(raw: bytes) -> None:
    error = _refusal(raw)
    assert error.code == "invalid_json"
    assert error.message.startswith("Request body is not valid JSON")


@pytest.mark.parametrize(
    "raw", [rb'{"model": "\ud800"}', rb'{"\udfff": 1}', rb'{"m": ["x\udc00\ud800"]}']
)
def test_an_unpaired_surrogate_escape_is_refused(raw: bytes) -> None:
    assert "unpaired UTF-16 surrogate" in _refusal(raw).message


def test_a_surrogate_pair_is_one_ordinary_character() -> None:
    assert parse_json_object(rb'{"m": "\ud83d\ude00"}') == {"m": "\U0001f600"}


def test_nesting_past_the_parsers_limit_is_refused() -> None:
    assert _refusal(b'{"m": ' + b"[" * 100_000 + b"]" * 100_000 + b"}").message == (
        "Request body is nested too deeply."
    )


@pytest.mark.parametrize("raw", [b"[]", b'"x"', b"1", b"null"])
def test_a_json_value_that_is_not_an_object_is_refused(raw: bytes) -> None:
    assert _refusal(raw).code == "invalid_request"
