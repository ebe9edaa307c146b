"""Each miniature is written once per test session and shared read-only by the unit tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.miniature_generator import MINIATURES, write_miniature


@pytest.fixture(scope="session")
def written_miniatures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("miniatures")
    return {name: write_miniature(name, root / name, seed=0) for name in MINIATURES}
