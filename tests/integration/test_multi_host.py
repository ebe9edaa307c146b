"""Multi-host, on a real multi-raylet cluster (`ray.cluster_utils.Cluster`) whose nodes have
distinct loopback addresses, their own weight caches and their own roles:

- the head, on the machine's own address (a driver reaches a head on 127.0.0.1 at that
  address, where a head bound to loopback does not listen): one stand-in accelerator slot,
  its cache under the state directory, ingress (as every head is), its gateway on
  127.0.0.1 as `up --host` says;
- node A, 127.0.0.2: one slot, its cache on a small volume of its own (an inventory
  override moves it there): room for the first model, not for the second;
- node B, 127.0.0.3: no slot, labelled `switchyard.io/role=ingress`.

Weights come from a local Hub on 127.0.0.1, so staging really downloads onto each node.
Engines are fake replicas (`up --fake-engines`): the subjects are staging per node, the
ingress nodes and the manager; Serve places and loses a fake replica exactly as a vLLM one.
Affinity on real vLLM engines is test_replica_affinity_vllm.py.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.local_hub import LocalHub
from tests.integration.small_volume import small_volume
from tests.support.client_pool import ClientPool
from tests.support.running_stack import SWITCHYARD, free_port, stack_env
from tests.support.waiting import wait_until

# Run alone with: .venv/bin/pytest tests/integration/test_multi_host.py -s

SLOTS = "accel_slot"
ENDPOINT_HOST, A_IP, B_IP = "127.0.0.1", "127.0.0.2", "127.0.0.3"
MODEL_REPO = "acme/mini-llama"
BIG_REPO = "acme/mini-llama-big"
MODEL = "mini-llama"
MIB = 1024**2
A_VOLUME_BYTES = 1024 * MIB + 32 * MIB
"""The manager keeps 1 GiB free on every cache volume: A has room for the 11 MB model,
not for the big one (its 48 MiB of padding)."""


def _safetensors(name: str, size: int) -> bytes:
    header = json.dumps({name: {"dtype": "U8", "shape": [size], "data_offsets": [0, size]}})
    encoded = header.encode()
    return struct.pack("<Q", len(encoded)) + encoded + bytes(size)


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalHub]:
    from cluster.miniature_generator import ensure_miniature

    directory = ensure_miniature("llama", tmp_path_factory.mktemp("hub-files"))
    files = {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}
    with LocalHub() as local_hub:
        local_hub.add_repo(MODEL_REPO, files)
        padding = {"model-padding.safetensors": _safetensors("padding", 48 * MIB)}
        local_hub.add_repo(BIG_REPO, {**files, **padding})
        yield local_hub


@pytest.fixture(scope="module")
def a_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with small_volume(tmp_path_factory.mktemp("node-a") / "cache", A_VOLUME_BYTES) as path:
        yield path


@pytest.fixture(scope="module")
def cluster(hub: LocalHub, a_cache: Path) -> Iterator[dict[str, Any]]:
    from cluster.inventory.node_roles import ROLE_LABEL
    from cluster.startup.ray_auth import apply_token_auth_default

    apply_token_auth_default()
    from ray.cluster_utils import Cluster

    # Every raylet (so the manager, staging tasks and replicas) inherits this environment.
    saved = {k: os.environ.get(k) for k in ("HF_ENDPOINT", "HF_HUB_OFFLINE")}
    os.environ["HF_ENDPOINT"] = hub.url
    os.environ.pop("HF_HUB_OFFLINE", None)
    test_cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 4,
            "resources": {SLOTS: 1},
            "include_dashboard": False,
        },
    )
    nodes = {
        "a": test_cluster.add_node(num_cpus=3, node_ip_address=A_IP, resources={SLOTS: 1}),
        "b": test_cluster.add_node(
            num_cpus=2, node_ip_address=B_IP, labels={ROLE_LABEL: "ingress"}
        ),
    }
    test_cluster.wait_for_nodes()
    assert test_cluster.head_node is not None
    head_ip = test_cluster.head_node.node_ip_address
    try:
        yield {"cluster": test_cluster, "head_ip": head_ip, **nodes}
    finally:
        test_cluster.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _cli(state_dir: Path, hub: LocalHub, *args: str, timeout_s: float = 600) -> Any:
    env = stack_env(state_dir)
    env.pop("HF_HUB_OFFLINE", None)
    env["HF_ENDPOINT"] = hub.url
    return subprocess.run(
        [SWITCHYARD, *args, "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
    )


@pytest.fixture(scope="module")
def stack(
    cluster: dict[str, Any],
    hub: LocalHub,
    a_cache: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, int, str]]:
    state_dir = tmp_path_factory.mktemp("multi-host-stack")
    inventory = state_dir / "inventory.yaml"
    inventory.write_text(
        "overrides:\n"
        + "".join(f"  - node_ip: {ip}\n    host_ram_gib: 64\n" for ip in (cluster["head_ip"], B_IP))
        + f"  - node_ip: {A_IP}\n    host_ram_gib: 64\n    cache_dir: {a_cache}\n"
    )
    fleet = state_dir / "fleet.yaml"
    fleet.write_text(
        f"models:\n  - name: {MODEL}\n    source: {MODEL_REPO}\n"
        "    aliases: [default]\n    replicas: 2\n"
    )
    port = free_port()
    up = _cli(
        state_dir,
        hub,
        "up",
        "--detach",
        "--fake-engines",
        "--address",
        cluster["cluster"].address,
        "--port",
        str(port),
        "--inventory",
        str(inventory),
        "-f",
        str(fleet),
    )
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield state_dir, port, up.stdout
    finally:
        _cli(state_dir, hub, "down", timeout_s=300)


def _status(state_dir: Path, hub: LocalHub) -> dict[str, Any]:
    result = _cli(state_dir, hub, "status", "--json", "--window-s", "0", timeout_s=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("{"))
    document: dict[str, Any] = json.loads("\n".join(lines[first:]))
    return document


def _journal(state_dir: Path) -> list[dict[str, Any]]:
    path = state_dir / "manager" / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _chat(ip: str, port: int) -> httpx.Response:
    body = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    return httpx.post(f"http://{ip}:{port}/v1/chat/completions", json=body, timeout=60)


def _staged_entries(cache: Path) -> list[Path]:
    return [p.parent for p in cache.rglob("model.safetensors") if "miniatures" not in p.parts]


def test_a_model_with_two_replicas_is_staged_on_both_of_its_nodes_and_serves(
    cluster: dict[str, Any], stack: tuple[Path, int, str], hub: LocalHub, a_cache: Path
) -> None:
    state_dir, port, up_output = stack
    # One download per node: the head's cache and A's own volume each hold a verified copy.
    assert len(hub.downloads(MODEL_REPO, "model.safetensors")) == 2
    assert _staged_entries(state_dir / "cache"), "nothing staged in the head's cache"
    assert _staged_entries(a_cache), "nothing staged in node A's cache"
    # The operation's events say where the weights went (`up -f` prints them).
    head_ip = cluster["head_ip"]
    for ip in (A_IP, head_ip):
        assert f"staged {MODEL_REPO} on node {ip}/" in up_output, up_output

    status = _status(state_dir, hub)
    model = next(m for m in status["models"] if m["name"] == MODEL)
    assert model["state"] == "ready" and model["replicas"] == 2
    for ip in (ENDPOINT_HOST, B_IP):
        reply = _chat(ip, port)
        assert reply.status_code == 200, (ip, reply.text)
    # Each replica's direct port is on its own node's address: reachable from B's gateway.
    replicas = [p for p in _replica_addresses(state_dir, hub) if p]
    assert sorted(replicas) == sorted([head_ip, A_IP]), replicas


def _replica_addresses(state_dir: Path, hub: LocalHub) -> list[str]:
    script = (
        "import json, ray\n"
        "from cluster.startup.ray_runtime import connect\n"
        "from serve_apps.registry.registry_actor import registry_actor\n"
        f"connect({json.dumps(_stack_address(state_dir))})\n"
        "found = ray.get(registry_actor(create=False).engine_endpoints.remote())\n"
        "print(json.dumps([e.url.split('//')[1].split(':')[0] for e in found]))\n"
    )
    env = stack_env(state_dir)
    result = subprocess.run(
        [str(Path(SWITCHYARD).with_name("python")), "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    )
    found: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


def _stack_address(state_dir: Path) -> str:
    from switchyard.stack import read_stack_info

    info = read_stack_info(state_dir)
    assert info is not None
    return info.address


def test_a_node_without_room_refuses_the_swap_by_name_before_anything_is_drained(
    stack: tuple[Path, int, str], hub: LocalHub
) -> None:
    state_dir, port, _ = stack
    before = len(_journal(state_dir))
    swap = _cli(state_dir, hub, "swap", MODEL, BIG_REPO, "--name", "mini-llama-big")
    output = swap.stdout + swap.stderr
    assert swap.returncode == 1, output
    assert A_IP in output, output
    # Refused before a byte: nothing of the big model was downloaded anywhere.
    assert hub.downloads(BIG_REPO, "model-padding.safetensors") == []
    events = _journal(state_dir)[before:]
    assert not any("drain" in json.dumps(e).lower() for e in events), events
    model = next(m for m in _status(state_dir, hub)["models"] if m["name"] == MODEL)
    assert model["state"] == "ready" and model["replicas"] == 2
    assert _chat(ENDPOINT_HOST, port).status_code == 200


def test_two_ingress_nodes_serve_the_same_models_and_losing_one_leaves_the_other_serving(
    cluster: dict[str, Any], stack: tuple[Path, int, str], hub: LocalHub
) -> None:
    state_dir, port, _ = stack
    endpoints = _status(state_dir, hub)["endpoints"]
    assert [(e["node_ip"], e["head"], e["alive"]) for e in endpoints] == [
        (cluster["head_ip"], True, True),
        (B_IP, False, True),
    ], endpoints
    assert [e["url"] for e in endpoints] == [
        f"http://{ENDPOINT_HOST}:{port}/v1",
        f"http://{B_IP}:{port}/v1",
    ]
    listed = [
        sorted(
            m["id"] for m in httpx.get(f"http://{ip}:{port}/v1/models", timeout=30).json()["data"]
        )
        for ip in (ENDPOINT_HOST, B_IP)
    ]
    assert listed[0] == listed[1] and MODEL in listed[0]

    with ClientPool(f"http://{ENDPOINT_HOST}:{port}/v1", "default", workers=4) as pool:
        time.sleep(2)
        cluster["cluster"].remove_node(cluster["b"], allow_graceful=False)
        time.sleep(8)
    report = pool.report
    assert report.ok > 20 and report.failures == [], report.failures[:5]
    wait_until(
        lambda: [e["alive"] for e in _status(state_dir, hub)["endpoints"]] == [True, False],
        60,
        2,
    )
