"""Why staging refused or failed. Each is a `Rejected`, so the CLI exits 1 with the message;
huggingface_hub's exceptions are translated into these with one clear line each.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib import import_module
from typing import TYPE_CHECKING

from domain.exit_codes import Rejected, UserInputError
from domain.model_source import ModelSource

if TYPE_CHECKING:
    from cluster.staging.space_gate import DiskVerdict


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


# --- huggingface_hub's exceptions


@contextmanager
def hub_errors(source: ModelSource, endpoint: str) -> Iterator[None]:
    """Translate huggingface_hub's exceptions into Switchyard's, each with one clear line."""
    from huggingface_hub.errors import (
        FileMetadataError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = f"{source} at {endpoint}"
    # huggingface_hub turns a failed connection during a download into LocalEntryNotFoundError
    # ("cannot find the requested files in the local cache"); it means the Hub was unreachable.
    unreachable: tuple[type[BaseException], ...] = (
        HfHubHTTPError,
        LocalEntryNotFoundError,
        FileMetadataError,
        OfflineModeIsEnabled,
        *transport_errors(),
    )
    try:
        yield
    except RevisionNotFoundError as exc:
        raise UserInputError(
            f"model source: revision {source.revision!r} does not exist in hub repo {where}"
        ) from exc
    except (GatedRepoError, RepositoryNotFoundError) as exc:
        raise UserInputError(
            f"model source: hub repo {where} does not exist or is not accessible "
            "(private and gated repos need HF_TOKEN)"
        ) from exc
    except unreachable as exc:
        raise HubUnreachableError(f"cannot read {where}: {one_line(exc)}") from exc


def transport_errors() -> tuple[type[Exception], ...]:
    """The HTTP client's connection errors (httpx2 in huggingface_hub 2.x, httpx in 1.x)."""
    for module_name in ("httpx2", "httpx"):
        try:
            module = import_module(module_name)
        except ImportError:
            continue
        error = getattr(module, "TransportError", None)
        if isinstance(error, type) and issubclass(error, Exception):
            return (error,)
    return ()


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
