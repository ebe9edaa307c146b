"""The lifecycle of one model's entry in a node's weight cache."""

from __future__ import annotations

from enum import StrEnum


class EntryState(StrEnum):
    """Where a cache entry stands. Only STAGED entries are ever handed to vLLM.

    ABSENT -> STAGING -> STAGED, or STAGING -> PARTIAL when the download stops (killed,
    network gone, integrity check failed). A PARTIAL entry becomes STAGING again on the next
    `stage()` of the same model, which keeps every complete file already on disk. Eviction
    turns PARTIAL or STAGED back into ABSENT.
    """

    ABSENT = "absent"
    """Nothing on disk."""
    STAGING = "staging"
    """A live process holds the entry's lock and is downloading or verifying it."""
    PARTIAL = "partial"
    """Some files are on disk but no staged marker: never served, resumable."""
    STAGED = "staged"
    """Every file is present and verified; the staged marker was written last."""
