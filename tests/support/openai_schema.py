"""OpenAI's published schemas (the pinned extract in tests/support/openai_openapi/) as a
checker of the bodies the gateway sends."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

_EXTRACT = Path(__file__).parent / "openai_openapi" / "schemas.json"


@cache
def _document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(_EXTRACT.read_text())
    return document


def schema_errors(schema: str, body: Any) -> list[str]:
    """Every place `body` breaks `#/components/schemas/<schema>`, as 'path: message'."""
    document = _document()
    if schema not in document["components"]["schemas"]:
        raise KeyError(f"{schema} is not in the pinned extract; add it to extract.py's ROOTS")
    root = {"$ref": f"#/components/schemas/{schema}", "components": document["components"]}
    validator = Draft202012Validator(root)
    return sorted(
        f"{'/'.join(str(p) for p in error.absolute_path) or '<body>'}: {error.message}"
        for error in validator.iter_errors(body)
    )


def pinned_commit() -> str:
    return str(_document()["commit"])
