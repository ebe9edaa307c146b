"""Model configs for the policy tests: the real reference configs and the family fixtures."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from policies.checkpoint.hf_config import parse_hf_config
from policies.checkpoint.model_spec import ModelSpec

FIXTURES = Path(__file__).parent / "fixtures"


def reference_config(name: str) -> dict[str, Any]:
    """A real config shipped in the package (cluster/miniature_generator/reference_configs/)."""
    text = resources.files("cluster.miniature_generator").joinpath(
        f"reference_configs/{name}.config.json"
    )
    data: dict[str, Any] = json.loads(text.read_text(encoding="utf-8"))
    return data


def fixture_config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.config.json").read_text())
    return data


@pytest.fixture
def reference_spec() -> Callable[[str], ModelSpec]:
    return lambda name: parse_hf_config(reference_config(name))


@pytest.fixture
def fixture_spec() -> Callable[[str], ModelSpec]:
    return lambda name: parse_hf_config(fixture_config(name))


@pytest.fixture(scope="session")
def minimax() -> ModelSpec:
    return parse_hf_config(reference_config("MiniMax-M2.5"))


@pytest.fixture(scope="session")
def kimi() -> ModelSpec:
    return parse_hf_config(reference_config("Kimi-K2.5"))
