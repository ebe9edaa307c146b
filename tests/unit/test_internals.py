"""The private APIs of serve_apps/internals.py exist in the installed Ray, Ray Serve LLM,
uvicorn and vLLM.

An upgrade that moves one fails here, naming it, instead of deep inside a swap or a stream.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from serve_apps import internals
from serve_apps.internals import (
    HEAD_NODE_RESOURCE,
    ServeLogTargets,
    _Requirement,
    app_of_placement_group,
    head_node_resources,
    is_head_node,
    missing_internals,
)

pytestmark = pytest.mark.unit


def test_the_installed_packages_have_every_private_api_switchyard_uses() -> None:
    missing = missing_internals()
    assert not missing, (
        "the installed packages lack private APIs Switchyard relies on (see "
        "serve_apps/internals.py for why each is needed): " + "; ".join(missing)
    )


def test_a_missing_api_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    gone = _Requirement("ray.serve.SomethingRemoved", lambda: False)
    monkeypatch.setattr(internals, "REQUIREMENTS", (*internals.REQUIREMENTS, gone))
    assert missing_internals() == ["ray.serve.SomethingRemoved"]


def test_head_node_pinning() -> None:
    assert head_node_resources() == {HEAD_NODE_RESOURCE: 0.001}
    assert is_head_node({"Resources": {HEAD_NODE_RESOURCE: 1.0, "CPU": 8.0}})
    assert not is_head_node({"Resources": {"CPU": 8.0}})
    assert not is_head_node({})


@pytest.mark.parametrize(
    ("name", "app"),
    [
        ("SERVE_REPLICA::model-kimi-g2#model-kimi-g2:kimi#abc123", "model-kimi-g2"),
        ("SERVE_REPLICA::gateway#Gateway#x", "gateway"),
        ("SERVE_GANG::model-kimi-g2", None),
        ("my-own-group", None),
        ("SERVE_REPLICA::no-separator", None),
    ],
)
def test_the_app_that_owns_a_placement_group(name: str, app: str | None) -> None:
    assert app_of_placement_group(name) == app


def test_generation_suffixes_never_match_each_other() -> None:
    # model-x-g1 must not claim model-x-g10's accelerators (a substring test would).
    assert app_of_placement_group("SERVE_REPLICA::model-x-g10#d#1") != "model-x-g1"


def test_every_package_with_a_private_api_is_checked() -> None:
    checked = " ".join(r.what for r in internals.REQUIREMENTS)
    for package in ("ray.serve", "LLMServer", "uvicorn", "vLLM"):
        assert package in checked, package


def test_vllm_parser_names_come_from_the_installed_vllm() -> None:
    tools = internals.vllm_parser_names("tool")
    assert tools is not None and "kimi_k2" in tools and "minimax_m2" in tools
    reasoning = internals.vllm_parser_names("reasoning")
    assert reasoning is not None and "deepseek_r1" in reasoning


def test_serves_replica_log_closed_by_a_logging_setup_is_given_its_file_back(
    tmp_path: Path,
) -> None:
    """What vLLM's engine start does in a replica (dictConfig closes every handler) and
    what the replica does about it: Serve's MemoryHandler gets its file handler back, and
    the next records reach the file."""
    import logging.config
    import logging.handlers

    from ray.serve._private.constants import SERVE_LOGGER_NAME

    serve_logger = logging.getLogger(SERVE_LOGGER_NAME)
    path = tmp_path / "replica.log"
    memory = logging.handlers.MemoryHandler(1, target=logging.FileHandler(path))
    serve_logger.addHandler(memory)
    try:
        kept = ServeLogTargets.now()
        logging.config.dictConfig({"version": 1, "disable_existing_loggers": False})
        assert memory.target is None
        assert kept.restore() == 1
        serve_logger.error("after the engine started")
        assert "after the engine started" in path.read_text()
        assert kept.restore() == 0
    finally:
        serve_logger.removeHandler(memory)
        memory.close()
