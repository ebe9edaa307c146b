"""Keys files (`up --keys`, a fleet file's `gateway.keys`): what an entry may say, and how it
resolves to a tenant that holds the key's SHA-256 only."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from domain.exit_codes import UserInputError
from domain.fleet_file import FleetFile
from domain.tenant_keys import Tenant, read_keys_file

SHA = hashlib.sha256(b"sk-bob").hexdigest()


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "keys.yaml"
    path.write_text(text)
    return path


def test_entries_resolve_to_tenants_holding_digests_only(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "keys:\n"
        "  - {name: alice, key_env: ALICE_KEY, models: [default], requests_per_minute: 5}\n"
        f"  - {{name: bob, key_sha256: {SHA}, tokens_per_minute: 1000}}\n"
        "  - {name: carol, key_env: CAROL_KEY, models: []}\n",
    )
    table = read_keys_file(path, {"ALICE_KEY": "sk-alice", "CAROL_KEY": "sk-carol"})
    alice, bob, carol = table.tenants
    assert alice == Tenant(
        "alice", hashlib.sha256(b"sk-alice").hexdigest(), frozenset({"default"}), 5, None
    )
    assert bob.key_sha256 == SHA and bob.models is None and bob.tokens_per_minute == 1000
    assert carol.models == frozenset()
    assert "sk-alice" not in repr(table) and table.source == str(path)


def test_an_allowed_alias_or_its_model_opens_the_request() -> None:
    tenant = Tenant("a", SHA, frozenset({"default"}))
    assert tenant.may_use("default", "kimi")
    assert not tenant.may_use("kimi", "kimi")
    assert Tenant("all", SHA).may_use("anything", "anything")
    assert not Tenant("none", SHA, frozenset()).may_use("default", "kimi")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("keys:\n  - {name: a}\n", "exactly one of key_env and key_sha256"),
        (f"keys:\n  - {{name: a, key_env: K, key_sha256: {SHA}}}\n", "exactly one"),
        ("keys:\n  - {name: a, key_sha256: ABC}\n", "keys.0.key_sha256"),
        ("keys:\n  - {name: a, key_env: K, requests_per_minute: 0}\n", "requests_per_minute"),
        ("keys:\n  - {name: a, key_env: K, colour: red}\n", "colour"),
        ("keys:\n  - {name: 'a b', key_env: K}\n", "keys.0.name"),
        ("keys:\n  - {name: a, key_env: K}\n  - {name: a, key_env: L}\n", "already used"),
        ("- {name: a, key_env: K}\n", "must hold a mapping"),
        ("tenants: []\n", "tenants"),
    ],
)
def test_a_bad_entry_is_refused_naming_the_field(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(UserInputError, match=expected):
        read_keys_file(_file(tmp_path, text), {"K": "k1", "L": "k2"})


@pytest.mark.parametrize("env", [{}, {"ALICE_KEY": ""}])
def test_an_unset_or_empty_key_env_names_the_entry_not_the_key(
    tmp_path: Path, env: dict[str, str]
) -> None:
    path = _file(tmp_path, "keys:\n  - {name: alice, key_env: ALICE_KEY}\n")
    with pytest.raises(UserInputError, match=r"\(alice\)\.key_env: .*ALICE_KEY is unset or empty"):
        read_keys_file(path, env)


def test_two_entries_with_one_key_are_refused(tmp_path: Path) -> None:
    path = _file(tmp_path, "keys:\n  - {name: a, key_env: K}\n  - {name: b, key_env: L}\n")
    with pytest.raises(UserInputError, match=r"\(b\): the same key as .*\(a\)"):
        read_keys_file(path, {"K": "same", "L": "same"})


def test_a_fleet_files_gateway_takes_the_same_entries() -> None:
    fleet = FleetFile.model_validate(
        {"gateway": {"keys": [{"name": "a", "key_env": "K", "models": ["default"]}]}}
    )
    assert fleet.gateway.keys is not None and fleet.gateway.keys[0].models == ("default",)
    with pytest.raises(ValueError, match="already used"):
        FleetFile.model_validate(
            {"gateway": {"keys": [{"name": "a", "key_env": "K"}, {"name": "a", "key_env": "L"}]}}
        )
