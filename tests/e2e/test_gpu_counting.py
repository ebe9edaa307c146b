"""Each GPU counted once on a fault-tolerant local head, through the CLI.

`up --gcs-store local` starts two raylets on one machine: the head (the control plane) and
its data node (the gateway and the engines). Left to count the machine's GPUs themselves,
both would declare all of them: one 8-GPU box would show 16, and engines could land on the
"control-plane-only" head. Here the machine's GPUs are logical (`--num-gpus 2`, a CPU box),
the inventory overridden as two RTX PRO 6000s, and the engines stand-ins on the GPU path
(`--accelerator gpu --fake-engines`): the head states 0 GPUs, the data node 2, `status`
shows both counts per node, and admission plans with 2: a model that needs the second one
after a first took one is admitted, one that needs two more is refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from cluster.inventory.node_roles import INGRESS_ROLE, ROLE_LABEL
from tests.support.running_stack import RunningStack
from tests.support.shared_stacks import serving

MACHINE_GPUS = 2


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    state_dir = tmp_path_factory.mktemp("gpu-counting")
    inventory = state_dir / "inventory.yaml"
    inventory.write_text(
        f"overrides:\n  - label: {ROLE_LABEL}={INGRESS_ROLE}\n"
        "    gpu_model: rtx-pro-6000\n    host_ram_gib: 64\n    disk_free_gib: 500\n"
    )
    yield from serving(
        state_dir,
        (
            "--fake-engines",
            "--accelerator",
            "gpu",
            "--num-gpus",
            str(MACHINE_GPUS),
            "--gcs-store",
            "local",
            "--model",
            "miniature:llama",
            "--inventory",
            str(inventory),
        ),
    )


def _nodes(stack: RunningStack) -> tuple[dict[str, Any], dict[str, Any]]:
    status = stack.status()
    inventory = status["inventory"]
    assert isinstance(inventory, dict)
    endpoints = status["endpoints"]
    assert isinstance(endpoints, list)
    # The data node serves the endpoint; a fault-tolerant head keeps traffic off itself.
    serving = {e["node"] for e in endpoints}
    (data,) = [n for n in inventory["nodes"] if n["node"] in serving]
    (head,) = [n for n in inventory["nodes"] if n is not data]
    return head, data


def test_the_head_states_no_gpu_and_the_data_node_the_machines(stack: RunningStack) -> None:
    head, data = _nodes(stack)
    assert (head["gpu_count_ray"], head["gpu_count"], head["accelerator"]) == (0, 0, "none")
    assert (data["gpu_count_ray"], data["gpu_count"], data["accelerator"]) == (
        MACHINE_GPUS,
        MACHINE_GPUS,
        "gpu",
    )
    assert data["gpu_model"] == "rtx-pro-6000-blackwell"


def test_the_model_runs_on_the_data_node_and_admission_counts_each_gpu_once(
    stack: RunningStack,
) -> None:
    fleet = stack.status()["models"]
    assert isinstance(fleet, list)
    assert [m["state"] for m in fleet] == ["ready"]
    # One GPU is left (the head has none to give): a second one-GPU model fits, a TP2 one
    # would only if the machine's GPUs were counted twice.
    fits = stack.cli("add", "miniature:llama", "--name", "second", "--dry-run", "--json")
    assert fits.returncode == 0, fits.stdout + fits.stderr
    wide = stack.cli("add", "miniature:llama", "--name", "wide", "--tp", "2", "--dry-run", "--json")
    assert wide.returncode != 0, wide.stdout
    refused = json.loads(wide.stdout[wide.stdout.index("{") :])
    assert "not_enough_gpus" in json.dumps(refused), refused


def test_status_shows_rays_count_beside_the_probes(stack: RunningStack) -> None:
    table = stack.cli("status", "--window-s", "0")
    assert table.returncode == 0, table.stderr
    assert f"{MACHINE_GPUS} gpu" in table.stdout
    assert "0 none" in table.stdout
