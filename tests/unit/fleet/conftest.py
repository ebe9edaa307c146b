"""An engine over an in-memory cluster (tests/support/memory_fleet.py), and restarts."""

from __future__ import annotations

from tests.support.fleet_configs import new_model
from tests.support.memory_fleet import Fleet

__all__ = ["NEW", "Fleet"]

# NEW's source differs from OLD's, so what is staged tells the two apart.
NEW = new_model("miniature:llama-new")
