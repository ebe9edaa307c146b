"""huggingface_hub's exceptions, translated into Switchyard's with one clear line each."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib import import_module

from cluster.staging.errors import HubUnreachableError
from domain.exit_codes import UserInputError
from domain.model_source import ModelSource


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
