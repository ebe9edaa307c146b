"""The data node of a fault-tolerant local head (`cluster/startup/data_node.py`): a worker
raylet on the head's machine that serves the traffic the head keeps off itself.

It joins the head at its address, is labelled ingress, declares the stand-in slots the
head no longer declares, and runs in the head's environment less the GCS store's
variables (only the GCS reads them).
"""

from __future__ import annotations

import json

import pytest

from cluster.inventory.node_roles import INGRESS_ROLE, ROLE_LABEL
from cluster.startup.data_node import data_node_command, data_node_environment
from cluster.startup.ray_runtime import visible_count


def test_the_data_node_joins_the_head_labelled_ingress_with_the_slots() -> None:
    command = data_node_command(
        "/venv/bin/ray",
        head_address="127.0.0.1:6379",
        node_ip_address="127.0.0.1",
        num_cpus=8,
        num_gpus=8,
        resources={"accel_slot": 4},
        dashboard_agent_port=52001,
    )
    assert command[:2] == ["/venv/bin/ray", "start"]
    # The machine's GPUs, stated: the head's raylet on the same machine states none.
    assert "--num-gpus=8" in command
    assert "--head" not in command
    assert "--address=127.0.0.1:6379" in command
    assert f"--labels={ROLE_LABEL}={INGRESS_ROLE}" in command
    (resources,) = [a for a in command if a.startswith("--resources=")]
    assert json.loads(resources.split("=", 1)[1]) == {"accel_slot": 4}
    assert "--dashboard-agent-listen-port=52001" in command


def test_the_data_node_runs_in_the_heads_environment_without_the_store() -> None:
    head_env = {
        "PATH": "/venv/bin:/usr/bin",
        "RAY_AUTH_MODE": "token",
        "RAY_gcs_rpc_server_reconnect_timeout_s": "600",
        "RAY_REDIS_ADDRESS": "127.0.0.1:7000",
        "RAY_external_storage_namespace": "switchyard-abc",
        "RAY_gcs_storage": "rocksdb",
        "RAY_gcs_storage_path": "/state/rocksdb",
    }
    assert data_node_environment(head_env) == {
        "PATH": "/venv/bin:/usr/bin",
        "RAY_AUTH_MODE": "token",
        "RAY_gcs_rpc_server_reconnect_timeout_s": "600",
    }


@pytest.mark.parametrize(
    ("devices", "visible", "count"),
    [(8, None, 8), (8, "0,1,2,3", 4), (8, "", 0), (2, "0,1,2,3", 2), (0, None, 0)],
)
def test_the_machines_gpus_are_what_cuda_visible_devices_leaves(
    devices: int, visible: str | None, count: int
) -> None:
    assert visible_count(devices, visible) == count
