"""The layers, as a specification: every import points down.

    switchyard/   CLI and composition root (no Ray: it reaches the cluster through cluster/)
        |
    cluster/      control plane: clients/, the fleet core fleet/ (no Ray), its Ray adapters,
        |         start-up, telemetry, inventory, staging, the miniature generator
    serve_apps/   data plane: gateway/, relay/, engine/, registry/, tenants/, internals.py
        |
    domain/       shared types: configs, model states, operation protocol, errors, metrics
        |
    policies/     pure admission rules (no Ray)

A module may import its own package and any package below it, never one above. Every
import counts: module level, inside functions, under `TYPE_CHECKING`, and
`importlib.import_module("...")` with a literal name. Other packages' private APIs (Ray,
Serve, Ray Serve LLM, uvicorn, vLLM) are used in one module only, `serve_apps/internals.py`
(the data-plane layer, so both planes can reach it); `domain/` and `policies/` import no Ray
at all.

Two rules follow imports through the project's own modules (and the packages that hold
them, whose `__init__` Python runs first):

- the fleet core (`cluster/fleet/`) reaches no `ray`: it is plain code against its ports,
  unit-tested in memory;
- no command (`switchyard/commands/`) reaches `ray` or calls `.remote(` through the CLI's
  own modules: commands talk to the cluster through `cluster/`'s typed clients and start-up
  API, the only way from the CLI to Ray.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
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
INTERNALS = Path("serve_apps/internals.py")
NO_RAY_PACKAGES = ("domain", "policies")

FLEET_CORE = "cluster.fleet"
COMMANDS = "switchyard.commands"
CLI = "switchyard"

# Other packages' private modules: Ray's whose dotted path has a private part, and uvicorn's
# protocol implementations; and the private attributes, arguments and resource names the
# code once reached for.
_PRIVATE_MODULE = re.compile(
    r"^(ray(\.\w+)*\.(_private|_internal|_raylet|_common)|uvicorn\.protocols)\b"
)
_PRIVATE_NAMES = (
    "__internal_head__",
    "_all_running_replicas",
    "_actor_id",
    "_llm_config",
    "_blocking",
    "_get_global_client",
    "_engine_client",
    "_engine_config",
    "httptools_impl",
    "_TOOL_PARSERS_TO_REGISTER",
    "_REASONING_PARSERS_TO_REGISTER",
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


def test_private_apis_are_used_in_internals_only() -> None:
    problems = []
    for path in _sources():
        if path == INTERNALS:
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
        f"private APIs outside {INTERNALS} (add them there, with the reason):\n"
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


def _module_name(path: Path) -> str:
    parts = path.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _project_modules() -> dict[str, Path]:
    return {_module_name(path): path for path in _sources() if _package_of(path) in LAYERS}


def _project_imports(module: str, modules: dict[str, Path]) -> set[str]:
    """The project modules `module` imports, each with the packages Python runs first."""
    found = set()
    for _, imported in _imports(ast.parse((ROOT / modules[module]).read_text())):
        parts = imported.split(".")
        while parts and ".".join(parts) not in modules:
            parts.pop()  # `from package.module import name`: the module holds the name
        for end in range(1, len(parts) + 1):
            found.add(".".join(parts[:end]))
    found.discard(module)
    return found & modules.keys()


def _reaches(
    start: str, modules: dict[str, Path], follow: str | None, uses: Callable[[str], bool]
) -> list[str] | None:
    """The import chain from `start`, through project modules under `follow` (None: any), to
    one for which `uses(module)` holds; None when there is none."""
    chains = [[start]]
    seen = {start}
    while chains:
        chain = chains.pop(0)
        if uses(chain[-1]):
            return chain
        for name in sorted(_project_imports(chain[-1], modules) - seen):
            if follow is None or name == follow or name.startswith(follow + "."):
                seen.add(name)
                chains.append([*chain, name])
    return None


def _imports_ray(modules: dict[str, Path]) -> Callable[[str], bool]:
    def check(module: str) -> bool:
        tree = ast.parse((ROOT / modules[module]).read_text())
        return any(imported.split(".")[0] == "ray" for _, imported in _imports(tree))

    return check


def _matches(modules: dict[str, Path], pattern: re.Pattern[str]) -> Callable[[str], bool]:
    return lambda module: bool(pattern.search((ROOT / modules[module]).read_text()))


def test_the_fleet_core_reaches_no_ray() -> None:
    modules = _project_modules()
    problems = [
        " -> ".join(chain) + " imports ray"
        for module in sorted(m for m in modules if m.startswith(FLEET_CORE))
        if (chain := _reaches(module, modules, None, _imports_ray(modules))) is not None
    ]
    assert not problems, "the fleet core reaches Ray:\n" + "\n".join(problems)


_RAY_USE = re.compile(r"^\s*(import ray\b|from ray\b)|\.remote\(", re.MULTILINE)


def test_no_command_reaches_ray_through_the_cli() -> None:
    modules = _project_modules()
    problems = [
        " -> ".join(chain)
        for module in sorted(m for m in modules if m.startswith(COMMANDS + "."))
        if (chain := _reaches(module, modules, CLI, _matches(modules, _RAY_USE))) is not None
    ]
    assert not problems, (
        "commands that import ray or call .remote( (themselves or through switchyard/); "
        "reach the cluster through cluster/clients/ instead:\n" + "\n".join(problems)
    )


def test_the_reach_checkers_follow_packages_and_find_a_ray_import(tmp_path: Path) -> None:
    fleet = {
        "cluster.fleet.a": "from cluster.fleet.b import thing\n",
        "cluster.fleet.b": "def thing():\n    from cluster.staging.c import x\n",
        "cluster.staging": "from cluster.staging.d import y\n",
        "cluster.staging.c": "x = 1\n",
        "cluster.staging.d": "import ray\n",
    }
    modules = {}
    for name, source in fleet.items():
        path = tmp_path / (name.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        modules[name] = path
    found = _project_imports("cluster.fleet.b", modules)
    assert found == {"cluster.staging", "cluster.staging.c"}
    ray_import = _imports_ray(modules)
    assert _reaches("cluster.fleet.a", modules, None, ray_import) == [
        "cluster.fleet.a",
        "cluster.fleet.b",
        "cluster.staging",
        "cluster.staging.d",
    ]
    assert _reaches("cluster.fleet.a", modules, "cluster.fleet", ray_import) is None
