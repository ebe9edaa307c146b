"""Ray token authentication defaults, kept free of heavy imports (the CLI calls it first)."""

from __future__ import annotations

import os
from pathlib import Path


def apply_token_auth_default() -> None:
    """Ray's own rule for `ray start`, applied to our drivers too: with RAY_AUTH_MODE unset,
    a token on disk means the cluster uses token auth. Must run before `import ray`, which
    reads RAY_AUTH_MODE once."""
    if "RAY_AUTH_MODE" not in os.environ and (Path.home() / ".ray" / "auth_token").exists():
        os.environ["RAY_AUTH_MODE"] = "token"
