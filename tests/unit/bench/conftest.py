"""Each miniature's tokenizer is written once per session and shared by the bench unit tests;
async tests run on asyncio through anyio's pytest plugin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cluster.miniature_generator import MINIATURES, write_miniature


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def miniature_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bench-miniatures")
    return {name: write_miniature(name, root / name, seed=0) for name in MINIATURES}


@pytest.fixture(scope="session")
def miniature_tokenizers(miniature_dirs: dict[str, Path]) -> dict[str, Any]:
    from transformers import AutoTokenizer

    return {name: AutoTokenizer.from_pretrained(path) for name, path in miniature_dirs.items()}
