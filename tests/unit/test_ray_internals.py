"""The private Ray/Serve APIs of serve_apps/ray_internals.py exist in the installed Ray.

A Ray upgrade that moves one fails here, naming it, instead of deep inside a swap.
"""

from __future__ import annotations

import pytest

from serve_apps import ray_internals
from serve_apps.ray_internals import (
    HEAD_NODE_RESOURCE,
    _Requirement,
    app_of_placement_group,
    head_node_resources,
    is_head_node,
    missing_ray_internals,
)

pytestmark = pytest.mark.unit


def test_the_installed_ray_has_every_private_api_switchyard_uses() -> None:
    missing = missing_ray_internals()
    assert not missing, (
        "the installed Ray lacks private APIs Switchyard relies on (see "
        "serve_apps/ray_internals.py for why each is needed): " + "; ".join(missing)
    )


def test_a_missing_api_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    gone = _Requirement("ray.serve.SomethingRemoved", lambda: False)
    monkeypatch.setattr(ray_internals, "REQUIREMENTS", (*ray_internals.REQUIREMENTS, gone))
    assert missing_ray_internals() == ["ray.serve.SomethingRemoved"]


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
