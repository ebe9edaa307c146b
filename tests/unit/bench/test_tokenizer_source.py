"""Where the tokenizer comes from when `--tokenizer` is not given: the stack's model source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from domain.exit_codes import UserInputError
from switchyard.bench.tokenizer_source import (
    locate_tokenizer,
    location_from_status,
    same_server,
)


def _status(source: str) -> dict[str, Any]:
    return {"models": [{"name": "served", "aliases": ["default"], "source": source}]}


def test_an_explicit_tokenizer_directory_always_wins(tmp_path: Path) -> None:
    found = locate_tokenizer(
        model="x", url="http://10.9.9.9:1/v1", tokenizer_dir=tmp_path, state_dir=tmp_path
    )
    assert found.name_or_path == str(tmp_path)


def test_a_miniature_resolves_to_the_stacks_miniature_cache(tmp_path: Path) -> None:
    found = location_from_status(_status("miniature:llama"), model="default", state_dir=tmp_path)
    path = Path(found.name_or_path)
    assert path.parent == tmp_path / "cache" / "miniatures"
    assert (path / "tokenizer.json").is_file()


def test_a_local_source_is_its_directory(tmp_path: Path) -> None:
    found = location_from_status(_status(str(tmp_path)), model="served", state_dir=tmp_path)
    assert found.name_or_path == str(tmp_path)


def test_a_hub_source_keeps_its_revision(tmp_path: Path) -> None:
    found = location_from_status(_status("org/model@v2"), model="served", state_dir=tmp_path)
    assert (found.name_or_path, found.revision) == ("org/model", "v2")


def test_a_model_the_stack_does_not_serve_is_named_with_what_it_serves(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match=r"--model: 'other'.*\['default', 'served'\]"):
        location_from_status(_status("org/model"), model="other", state_dir=tmp_path)


def test_servers_are_compared_by_host_and_port() -> None:
    assert same_server("http://127.0.0.1:8000", "http://127.0.0.1:8000/v1")
    assert not same_server("http://127.0.0.1:8000", "http://127.0.0.1:8001/v1")
