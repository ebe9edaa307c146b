"""Where `switchyard bench` gets the served model's tokenizer from.

1. `--tokenizer DIR` always wins: any directory `transformers.AutoTokenizer` can load.
2. Otherwise, when `--url` is the endpoint of the stack recorded in the state directory
   ($SWITCHYARD_HOME, default ~/.switchyard), the model's source as `switchyard status --json`
   reports it:
   - `miniature:NAME` -> the stack's miniature cache (<state dir>/cache/miniatures), written
     there if it is missing (miniature tokenizers are the same for every seed);
   - a local directory -> that directory;
   - a Hub repo (`org/name[@rev]`) -> that repo, through the Hugging Face cache.
3. Anything else (a remote endpoint, another server) needs `--tokenizer`.

`switchyard status` runs as a subprocess so this process never joins the Ray cluster: its
threads would compete with the load generator for CPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from domain.exit_codes import UserInputError

STATUS_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class TokenizerLocation:
    """What to hand to `AutoTokenizer.from_pretrained`."""

    name_or_path: str
    revision: str | None = None
    why: str = ""
    """Where it was found, for the report."""


def locate_tokenizer(
    *, model: str, url: str, tokenizer_dir: Path | None, state_dir: Path
) -> TokenizerLocation:
    if tokenizer_dir is not None:
        return TokenizerLocation(str(tokenizer_dir), why="--tokenizer")
    from switchyard.stack import read_stack_info

    info = read_stack_info(state_dir)
    if info is None or not same_server(info.endpoint, url):
        raise UserInputError(
            f"--tokenizer: needed, because {url} is not the endpoint of the stack recorded in "
            f"{state_dir}; pass the served model's tokenizer directory"
        )
    status = _stack_status(state_dir)
    return location_from_status(status, model=model, state_dir=state_dir)


def same_server(endpoint: str, url: str) -> bool:
    a, b = urlsplit(endpoint), urlsplit(url)
    return (a.hostname, a.port) == (b.hostname, b.port)


def location_from_status(
    status: dict[str, Any], *, model: str, state_dir: Path
) -> TokenizerLocation:
    """The tokenizer of the model (name or alias) in a `switchyard status --json` object."""
    from domain.model_source import SourceKind, parse_model_source

    for entry in status.get("models", []):
        if model == entry.get("name") or model in entry.get("aliases", []):
            source = parse_model_source(str(entry["source"]))
            why = f"the stack's source of {entry['name']}: {source}"
            if source.kind is SourceKind.MINIATURE:
                assert source.name is not None
                return TokenizerLocation(str(_miniature_dir(source.name, state_dir)), why=why)
            if source.kind is SourceKind.LOCAL:
                return TokenizerLocation(str(source.path), why=why)
            assert source.repo_id is not None
            return TokenizerLocation(source.repo_id, source.revision, why=why)
    served = sorted(
        {e.get("name", "?") for e in status.get("models", [])}
        | {a for e in status.get("models", []) for a in e.get("aliases", [])}
    )
    raise UserInputError(f"--model: {model!r} is not served by the stack; it serves {served}")


def _miniature_dir(name: str, state_dir: Path) -> Path:
    from cluster.miniature_generator import ensure_miniature
    from cluster.staging.cache_layout import CacheLayout

    # The same cache `switchyard up` stages miniatures into (switchyard.stack).
    return ensure_miniature(name, CacheLayout(state_dir / "cache").miniatures_dir)


def _stack_status(state_dir: Path) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "switchyard",
        "status",
        "--json",
        "--state-dir",
        str(state_dir),
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=STATUS_TIMEOUT_S, check=False
    )
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserInputError(
            f"--tokenizer: needed, because `switchyard status` failed ({last}); pass the "
            "served model's tokenizer directory"
        )
    status: dict[str, Any] = json.loads(result.stdout)
    return status


def load_tokenizer(location: TokenizerLocation) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(location.name_or_path, revision=location.revision)
    except (OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UserInputError(
            f"--tokenizer: could not load a tokenizer from {location.name_or_path} ({first})"
        ) from None
