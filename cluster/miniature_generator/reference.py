"""The real models' config.json files, shipped in
`cluster/miniature_generator/reference_configs/`."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

KIMI_K25_CONFIG = "Kimi-K2.5.config.json"
MINIMAX_M25_CONFIG = "MiniMax-M2.5.config.json"


def load_reference_config(filename: str) -> dict[str, Any]:
    """Read one real config.json; the files are package data, so this never touches the network."""
    text = (
        resources.files("cluster.miniature_generator")
        .joinpath("reference_configs", filename)
        .read_text()
    )
    config = json.loads(text)
    if not isinstance(config, dict):
        raise ValueError(f"reference config {filename} is not a JSON object")
    return config
