"""Why staging refused or failed. Each is a `Rejected`, so the CLI exits 1 with the message."""

from __future__ import annotations

from typing import TYPE_CHECKING

from domain.exit_codes import Rejected

if TYPE_CHECKING:
    from cluster.staging.budget import DiskVerdict


class StagingError(Rejected):
    """Staging did not produce a usable model; nothing that serves was touched."""


class InsufficientDiskError(StagingError):
    """Refused before the first byte: the node's cache volume cannot hold what is missing."""

    def __init__(self, verdict: DiskVerdict) -> None:
        super().__init__(verdict.describe())
        self.verdict = verdict


class IntegrityError(StagingError):
    """Downloaded files do not match the manifest; they were removed and the entry stays partial."""


class HubUnreachableError(StagingError):
    """The Hub (or `HF_ENDPOINT`) could not be reached or answered with a server error."""
