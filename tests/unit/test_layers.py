"""The layers, as a specification: every import points down.

    switchyard/   CLI and composition root
        |
    cluster/      control plane: fleet engine, manager actor, staging, node probes
        |
    serve_apps/   data plane: gateway, engine replicas, registry, ray_internals.py
        |
    domain/       shared types: configs, model states, operation protocol, errors, metrics
        |
    policies/     pure admission rules (no Ray)

A module may import its own package and any package below it, never one above. Every
import counts: module level, inside functions, under `TYPE_CHECKING`, and
`importlib.import_module("...")` with a literal name. Private Ray and Serve APIs are used
in one module only, `serve_apps/internals.py` (the data-plane layer, so both planes can
reach it); `domain/` and `policies/` import no Ray at all.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]

# Higher number = higher layer. A module may import its own layer or lower ones.
LAYERS: dict[str, int] = {
    "switchyard": 4,
    "cluster": 3,
    "serve_apps": 2,
    "domain": 1,
    "policies": 0,
}
RAY_INTERNALS = Path("serve_apps/internals.py")
NO_RAY_PACKAGES = ("domain", "policies")

# Private Ray/Serve names: modules whose dotted path has a private part, and the private
# attributes, arguments and resource names the code once reached for.
_PRIVATE_MODULE = re.compile(r"^ray(\.\w+)*\.(_private|_internal|_raylet|_common)\b")
_PRIVATE_NAMES = (
    "__internal_head__",
    "_all_running_replicas",
    "_actor_id",
    "_llm_config",
    "_blocking",
    "_get_global_client",
)


def _sources() -> Iterator[Path]:
    for package in (*LAYERS, "benchmarks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT)


def _imports(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, module) for every import statement and literal import_module call."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
            # `from ray.serve import _private` reaches a private module too.
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


def _package_of(path: Path) -> str:
    return path.parts[0]


def test_every_import_points_down_the_layers() -> None:
    problems = []
    for path in _sources():
        own = _package_of(path)
        if own not in LAYERS:
            continue  # benchmarks sit above everything, like the CLI
        for line, module in _imports(ast.parse((ROOT / path).read_text())):
            target = module.split(".")[0]
            if target in LAYERS and LAYERS[target] > LAYERS[own]:
                problems.append(f"{path}:{line}: {own} imports {module}")
    assert not problems, "imports pointing up the layers:\n" + "\n".join(problems)


def test_domain_and_policies_import_no_ray() -> None:
    problems = [
        f"{path}:{line}: {_package_of(path)} imports {module}"
        for path in _sources()
        if _package_of(path) in NO_RAY_PACKAGES
        for line, module in _imports(ast.parse((ROOT / path).read_text()))
        if module.split(".")[0] == "ray"
    ]
    assert not problems, "\n".join(problems)


def test_private_ray_apis_are_used_in_ray_internals_only() -> None:
    problems = []
    for path in _sources():
        if path == RAY_INTERNALS:
            continue
        text = (ROOT / path).read_text()
        for line, module in _imports(ast.parse(text)):
            if _PRIVATE_MODULE.match(module):
                problems.append(f"{path}:{line}: imports {module}")
        for number, source_line in enumerate(text.splitlines(), start=1):
            code = source_line.split("#", 1)[0]
            for name in _PRIVATE_NAMES:
                if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", code):
                    problems.append(f"{path}:{number}: uses {name}")
    assert not problems, (
        f"private Ray/Serve APIs outside {RAY_INTERNALS} (add them there, with the reason):\n"
        + "\n".join(problems)
    )


def test_the_layer_checker_sees_imports_inside_functions_and_type_checking() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from cluster.fleet.journal import Journal\n"
        "def f():\n"
        "    import switchyard.cli\n"
        "    importlib.import_module('serve_apps.gateway.app')\n"
    )
    found = {module for _, module in _imports(ast.parse(source))}
    assert {"cluster.fleet.journal", "switchyard.cli", "serve_apps.gateway.app"} <= found
