"""The data node of a fault-tolerant local head: traffic off the head.

With `up --gcs-store`, the head runs the control plane only (the GCS, the dashboard,
Serve's controller, the fleet manager and the registry) and declares no accelerator
slots and `--num-gpus 0`. `up` starts a second raylet on this machine that joins the head,
labelled `switchyard.io/role=ingress` and declaring the stand-in slots and the machine's
GPUs: the gateway and every engine run there. When the head's processes die, the data
node's raylet waits for the GCS (`RAY_gcs_rpc_server_reconnect_timeout_s`), and the
gateway and engines it hosts keep serving from what they hold.

On several machines the same split is the operator's: ingress and accelerator nodes join
the head with `ray start --address` (docs/reliability.md).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping

from cluster.inventory.node_roles import INGRESS_ROLE, ROLE_LABEL

_STORE_VARIABLES = (
    "RAY_REDIS_ADDRESS",
    "RAY_external_storage_namespace",
    "RAY_gcs_storage",
    "RAY_gcs_storage_path",
)
"""The head's store: only the GCS reads it, and a worker raylet must not think it has one."""


def data_node_command(
    ray_cli: str,
    *,
    head_address: str,
    node_ip_address: str,
    num_cpus: int,
    num_gpus: int,
    resources: Mapping[str, int],
    dashboard_agent_port: int,
) -> list[str]:
    """`ray start` joining the head as the ingress and accelerator node: it states the
    machine's GPUs (the head states none), so each GPU is counted once."""
    return [
        ray_cli,
        "start",
        f"--address={head_address}",
        f"--node-ip-address={node_ip_address}",
        f"--num-cpus={num_cpus}",
        f"--num-gpus={num_gpus}",
        f"--resources={json.dumps(dict(resources))}",
        f"--labels={ROLE_LABEL}={INGRESS_ROLE}",
        f"--dashboard-agent-listen-port={dashboard_agent_port}",
        "--disable-usage-stats",
    ]


def data_node_environment(head_env: Mapping[str, str]) -> dict[str, str]:
    """The head's environment (Serve's settings, PATH, the reconnect timeout, token auth)
    without the GCS store's variables."""
    return {k: v for k, v in head_env.items() if k not in _STORE_VARIABLES}


def start_data_node(command: list[str], env: Mapping[str, str]) -> None:
    """Run `ray start` for the data node; raise with its last lines when it fails."""
    result = subprocess.run(
        command, capture_output=True, text=True, check=False, env=dict(env), timeout=300
    )
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-5:]
        raise RuntimeError("`ray start` of the data node failed: " + " | ".join(tail))
