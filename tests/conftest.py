"""Suite-wide wiring: tier markers, the order modules run in, and the shared stacks.

Each tier's marker follows from its folder, so `-m unit` etc. select tiers. GPU tests are
skipped, with the reason, where no NVIDIA GPU is visible. Modules run in `MODULE_ORDER`:
fast and standalone ones first, then those sharing the fake stack, then those sharing the
real stack (read-only first, then those that swap or kill on it), then those starting
stacks of their own; each shared stack starts on first use and stops at the session's end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from tests.support.running_stack import RunningStack
from tests.support.shared_stacks import fake_up_args, real_up_args, serving
from tests.support.story_swap import StorySwap, run_story_swap

_TIERS = ("unit", "integration", "e2e", "faults", "gpu")

MODULE_ORDER: tuple[str, ...] = (
    "unit/",
    "integration/test_staging_",
    "integration/test_plan_hub.py",
    "integration/test_fleet_file_story.py",
    "faults/test_disk_fills_during_staging.py",
    "faults/test_fleet_manager_faults.py",
    "faults/test_control_actor_deadlines.py",
    "integration/test_inventory_probe.py",
    # The fake stack: read-only users, then those that change it.
    "e2e/test_inventory_status.py",
    "integration/test_gateway_plane.py",
    "integration/test_bench_sweep.py",
    "faults/test_error_statuses.py",
    "faults/test_control_actor_restarts.py",
    "e2e/test_fleet_operations.py",
    "faults/test_gateway_faults.py",
    "e2e/test_fleet_file.py",
    "integration/test_tenants.py",
    "faults/test_gcs_outage.py",
    # The real stack: read-only users, then the story's swap, then a killed engine.
    "integration/test_serving_plane.py",
    "integration/test_openai_surface.py",
    "integration/test_secure_defaults.py",
    "faults/test_bad_input.py",
    "integration/test_on_demand_vllm.py",
    "e2e/test_hot_swap.py",
    "integration/test_observability.py",
    "integration/test_replica_affinity_vllm.py",
    "faults/test_serving_faults.py",
    "integration/test_fleet_file_engines.py",
    "faults/test_gcs_outage_vllm.py",
    # Stacks and engines of their own.
    "integration/test_engines.py",
    "integration/test_placement.py",
    "faults/test_node_loss.py",
    "integration/test_multi_host.py",
    "e2e/test_sleep_story.py",
    "e2e/test_gpu_counting.py",
    "e2e/test_lifecycle.py",
    "e2e/test_make_run.py",
    "gpu/",
)


def _rank(relative: str) -> int:
    for index, prefix in enumerate(MODULE_ORDER):
        if relative.startswith(prefix):
            return index
    return len(MODULE_ORDER)


# The session-wide fixtures that hold running processes. Each is released right after the
# last test that uses it (an idle Ray stack takes CPU from the engines starting after it on
# two cores), not at the session's end.
_SHARED = ("fake_stack", "real_stack", "story_swap")
_LAST_USER = pytest.StashKey[dict[str, str]]()
_RELEASE = pytest.StashKey[dict[str, Callable[[], None]]]()

T = TypeVar("T")


def _held(request: pytest.FixtureRequest, name: str, resource: Iterator[T]) -> Iterator[T]:
    """Yield what `resource` yields; finish it after `name`'s last user or at the end."""
    value = next(resource)
    done = False

    def release() -> None:
        nonlocal done
        if not done:
            done = True
            next(resource, None)

    request.config.stash[_RELEASE][name] = release
    try:
        yield value
    finally:
        release()


@pytest.fixture(scope="session")
def real_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    """The real stack of tests/support/shared_stacks.py (vLLM engines)."""
    stack = serving(tmp_path_factory.mktemp("real-stack"), real_up_args())
    yield from _held(request, "real_stack", stack)


@pytest.fixture(scope="session")
def story_swap(request: pytest.FixtureRequest, real_stack: RunningStack) -> Iterator[StorySwap]:
    """The story's swap on the real stack, Kimi -> MiniMax under load (story_swap.py)."""
    yield from _held(request, "story_swap", run_story_swap(real_stack))


@pytest.fixture(scope="session")
def fake_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    """The fake stack of tests/support/shared_stacks.py (fake engine replicas)."""
    state_dir = tmp_path_factory.mktemp("fake-stack")
    yield from _held(request, "fake_stack", serving(state_dir, fake_up_args(state_dir)))


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_LAST_USER] = {}
    config.stash[_RELEASE] = {}


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    releases = item.config.stash[_RELEASE]
    for name, last in item.config.stash[_LAST_USER].items():
        if last == item.nodeid and name in releases:
            releases.pop(name)()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests_root = Path(__file__).parent

    def rank(item: pytest.Item) -> int:
        try:
            return _rank(Path(item.path).relative_to(tests_root).as_posix())
        except ValueError:
            return len(MODULE_ORDER)

    items.sort(key=rank)  # stable: file order within a module is kept
    last_user = config.stash[_LAST_USER]
    for item in items:
        for name in _SHARED:
            if name in getattr(item, "fixturenames", ()):
                last_user[name] = item.nodeid
    gpu_present: bool | None = None
    for item in items:
        try:
            tier = Path(item.path).relative_to(tests_root).parts[0]
        except ValueError:
            continue
        if tier in _TIERS:
            item.add_marker(getattr(pytest.mark, tier))
        if item.get_closest_marker("gpu") is not None:
            if gpu_present is None:
                from cluster.inventory.gpu_presence import has_nvidia_gpu

                gpu_present = has_nvidia_gpu()
            if not gpu_present:
                item.add_marker(
                    pytest.mark.skip(
                        reason="needs an NVIDIA GPU (neither NVML nor nvidia-smi sees one)"
                    )
                )
