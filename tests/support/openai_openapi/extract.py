"""Writes `schemas.json`: the part of OpenAI's published OpenAPI document the gateway's
bodies are checked against (tests/unit/gateway/test_openai_bodies.py and the real-stack
tests/integration/test_openai_surface.py).

The document is openai/openai-openapi's `openapi.json` (3.4 MB); only the component schemas
reachable from `ROOTS` are kept, unchanged, with the commit they came from. To move the pin:

    git clone https://github.com/openai/openai-openapi /tmp/openai-openapi
    python tests/support/openai_openapi/extract.py /tmp/openai-openapi
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOTS = (
    "CreateChatCompletionResponse",
    "CreateChatCompletionStreamResponse",
    "CreateCompletionResponse",
    "CreateEmbeddingResponse",
    "Response",
    "ListModelsResponse",
    "Model",
    "ErrorResponse",
)
HERE = Path(__file__).parent


def _refs(node: Any, out: set[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                out.add(value.rsplit("/", 1)[-1])
            else:
                _refs(value, out)
    elif isinstance(node, list):
        for value in node:
            _refs(value, out)


def reachable(schemas: dict[str, Any], roots: tuple[str, ...]) -> dict[str, Any]:
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        found: set[str] = set()
        _refs(schemas[name], found)
        todo.extend(found - seen)
    return {name: schemas[name] for name in sorted(seen)}


def main(repo: Path) -> None:
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    spec = json.loads((repo / "openapi.json").read_text())
    extract = {
        "source": f"https://github.com/openai/openai-openapi/blob/{commit}/openapi.json",
        "commit": commit,
        "openapi": spec["openapi"],
        "roots": list(ROOTS),
        "components": {"schemas": reachable(spec["components"]["schemas"], ROOTS)},
    }
    (HERE / "schemas.json").write_text(json.dumps(extract, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
