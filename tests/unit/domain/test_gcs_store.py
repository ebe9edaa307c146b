"""`--gcs-store`'s value, parsed once into a typed record; anything else is refused in one
line naming the value and what is allowed, and a password never rides in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from domain.exit_codes import UserInputError
from domain.gcs_store import GcsStoreKind, parse_gcs_store


def test_the_three_stores_parse_and_print_back() -> None:
    local = parse_gcs_store("local")
    assert local.kind is GcsStoreKind.LOCAL and local.to_text() == "local"
    redis = parse_gcs_store("redis://10.0.0.5:6380")
    assert (redis.kind, redis.host, redis.port) == (GcsStoreKind.REDIS, "10.0.0.5", 6380)
    assert redis.to_text() == "redis://10.0.0.5:6380"
    assert redis.describe() == "redis 10.0.0.5:6380"
    rocks = parse_gcs_store("rocksdb:/var/lib/ray-gcs")
    assert rocks.kind is GcsStoreKind.ROCKSDB and rocks.path == Path("/var/lib/ray-gcs")
    assert parse_gcs_store(rocks.to_text()) == rocks


@pytest.mark.parametrize(
    "text, says",
    [
        ("redis", "is not one of local, redis://HOST:PORT or rocksdb:PATH"),
        ("redis://host", "is not redis://HOST:PORT"),
        ("redis://host:99999", "is not redis://HOST:PORT"),
        ("redis://:secret@host:6379", "pass it in an environment variable"),
        ("rocksdb:", "names no directory"),
        ("etcd://host:2379", "is not one of"),
    ],
)
def test_anything_else_is_refused_naming_the_flag_and_the_value(text: str, says: str) -> None:
    with pytest.raises(UserInputError) as refused:
        parse_gcs_store(text)
    message = str(refused.value)
    assert message.startswith("--gcs-store: ") and repr(text) in message and says in message
    assert "\n" not in message
