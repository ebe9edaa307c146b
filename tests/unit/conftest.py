"""Fixtures every unit test may use: async tests run on asyncio through anyio's pytest plugin
(installed with Starlette); `fleet` is a fleet engine over the in-memory cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.memory_cluster import MemoryCluster
from tests.support.memory_fleet import Fleet


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fleet(tmp_path: Path) -> Fleet:
    return Fleet(tmp_path / "state", MemoryCluster(tmp_path / "nodes"))
