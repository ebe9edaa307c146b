"""What `down` reads of a local head without calling Ray, and the foreground `up`'s check
that its cluster is still there: both answer at once whatever state the head is in."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from cluster.startup.ray_runtime import (
    LOCAL_HEAD_MARKER,
    LocalHeadState,
    gcs_gone_within,
    gcs_reachable,
    local_head_state,
)
from switchyard.teardown import STACK_FILE, stack_down

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("state", "said"),
    [
        (LocalHeadState(False, None, 0, gcs_alive=False, raylet_alive=False), "no local Ray head"),
        (LocalHeadState(True, "/s", 0, gcs_alive=False, raylet_alive=False), "already gone"),
        (LocalHeadState(True, "/s", 9, gcs_alive=True, raylet_alive=True), "running (9"),
        (
            LocalHeadState(True, "/s", 4, gcs_alive=True, raylet_alive=False),
            "half dead (GCS running, raylet gone; 4 processes)",
        ),
    ],
)
def test_the_head_is_described_as_found(state: LocalHeadState, said: str) -> None:
    assert said in state.describe()


def test_a_recorded_head_whose_session_runs_no_process_is_already_gone(tmp_path: Path) -> None:
    (tmp_path / LOCAL_HEAD_MARKER).write_text(json.dumps({"session_dir": str(tmp_path / "s")}))
    state = local_head_state(tmp_path)
    assert (state.recorded, state.processes) == (True, 0)


def test_down_on_a_vanished_head_cleans_the_records_and_says_so(tmp_path: Path) -> None:
    (tmp_path / LOCAL_HEAD_MARKER).write_text(json.dumps({"session_dir": str(tmp_path / "s")}))
    (tmp_path / STACK_FILE).write_text("{}")
    (tmp_path / "manager").mkdir()
    (tmp_path / "manager" / "fleet.json").write_text("{}")
    said: list[str] = []
    assert stack_down(tmp_path, None, said.append, recorded_address="127.0.0.1:1")
    assert said == ["the local Ray head is already gone (no process of its session runs)"]
    assert not (tmp_path / LOCAL_HEAD_MARKER).exists()
    assert not (tmp_path / STACK_FILE).exists()
    assert not (tmp_path / "manager" / "fleet.json").exists()


def test_nothing_recorded_is_nothing_to_stop(tmp_path: Path) -> None:
    said: list[str] = []
    assert not stack_down(tmp_path, None, said.append)
    assert said == []


def test_a_gcs_port_is_reachable_until_it_closes() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert gcs_reachable(f"127.0.0.1:{port}")
    assert not gcs_reachable(f"127.0.0.1:{port}")
    assert not gcs_reachable("not-an-address")


def test_a_cluster_that_stops_accepting_connections_is_seen_gone() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert not gcs_gone_within(f"127.0.0.1:{port}", 0.2, poll_s=0.05), "still listening"
    assert gcs_gone_within(f"127.0.0.1:{port}", 0.2, poll_s=0.05)
