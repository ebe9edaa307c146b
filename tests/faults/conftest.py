"""Shared by the fault modules that run the manager against real Ray with Serve stood in."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[None]:
    from cluster.startup.ray_auth import apply_token_auth_default

    apply_token_auth_default()
    import ray

    # "local": always a new instance, never another helper's cluster found on this machine.
    ray.init(address="local", num_cpus=2, resources={"accel_slot": 1}, include_dashboard=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def miniatures(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One staging cache for the module: the llama miniature is generated once."""
    return tmp_path_factory.mktemp("miniature-cache")


@pytest.fixture
def registry(ray_instance: None) -> Iterator[Any]:
    import ray

    from serve_apps.registry.registry_actor import (
        REGISTRY_ACTOR_NAME,
        SWITCHYARD_NAMESPACE,
        forget_registry_state,
        registry_actor,
    )

    actor = registry_actor()
    try:
        yield actor
    finally:
        ray.kill(actor, no_restart=True)
        # Its saved state too, as `down` deletes it: a registry created next in this Ray
        # instance would restore this test's table.
        forget_registry_state()
        # The next test must get a fresh registry, not this one's name still being released.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                ray.get_actor(REGISTRY_ACTOR_NAME, namespace=SWITCHYARD_NAMESPACE)
            except ValueError:
                break
            time.sleep(0.2)
