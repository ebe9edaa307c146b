"""A command never waits forever on a control actor that does not answer (one that Ray has
not placed again yet after the head's loss, or one that hangs), against real Ray with the
manager stood in by actors that answer late or never:

- each call on the manager ends within the client's deadline with one line naming the
  actor and what was asked (the CLI exits 3 on it);
- an operation whose manager stops answering its progress polls ends the same way;
- an operation that runs long while its manager answers is waited for: the deadline is on
  answers, not on the operation's own time (an engine start takes minutes).

The deadline on a whole stack after the head's loss is tests/faults/test_gcs_outage_vllm.py.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from cluster.clients.manager_client import RayManagerClient
from domain.exit_codes import ControlActorUnresponsive, HeadUnavailable
from domain.operation_request import RemoveRequest

ANSWER_S = 1.0
FOREVER_S = 3600.0


class SilentManager:
    """Takes every call and never answers it."""

    def identity(self) -> str:
        time.sleep(FOREVER_S)
        return ""

    def export_fleet(self) -> list[Any]:
        time.sleep(FOREVER_S)
        return []

    def run(self, request: Any) -> Any:
        time.sleep(FOREVER_S)

    def events(self, since: int) -> list[Any]:
        time.sleep(FOREVER_S)
        return []


class SlowButAnsweringManager:
    """Runs an operation for a few seconds, answering progress polls meanwhile."""

    def run(self, request: Any) -> str:
        time.sleep(3 * ANSWER_S)
        return "finished"

    def events(self, since: int) -> list[Any]:
        return []


def _actor(cls: type) -> Any:
    import ray

    return ray.remote(cls).options(max_concurrency=4, num_cpus=0).remote()


@pytest.fixture(scope="module")
def silent(ray_instance: None) -> RayManagerClient:
    return RayManagerClient(_actor(SilentManager), answer_s=ANSWER_S)


def test_a_call_on_a_manager_that_never_answers_ends_in_one_line(
    silent: RayManagerClient,
) -> None:
    started = time.monotonic()
    with pytest.raises(ControlActorUnresponsive) as raised:
        silent.export_fleet()
    assert time.monotonic() - started < ANSWER_S + 5
    message = str(raised.value)
    assert "fleet manager" in message and "fleet's entries" in message
    assert "\n" not in message
    assert isinstance(raised.value, HeadUnavailable)  # the CLI exits 3 on it


def test_an_operation_whose_manager_stops_answering_ends_in_one_line(
    silent: RayManagerClient,
) -> None:
    started = time.monotonic()
    with pytest.raises(ControlActorUnresponsive) as raised:
        silent.run(RemoveRequest(name="anything"))
    assert time.monotonic() - started < ANSWER_S + 10
    assert "stopped answering during the operation" in str(raised.value)
    assert "journal" in str(raised.value)


def test_an_operation_longer_than_the_deadline_is_waited_for_while_its_manager_answers(
    ray_instance: None,
) -> None:
    client = RayManagerClient(_actor(SlowButAnsweringManager), answer_s=ANSWER_S)
    result: object = client.run(RemoveRequest(name="anything"))
    assert result == "finished"
