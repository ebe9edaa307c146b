"""Connecting to a Ray cluster, or starting a local head when none is named.

A local head is started with `ray start` (not `ray.init`) so it outlives the `switchyard
up` process when `--detach` is used; a marker file records that Switchyard started it,
so `switchyard down` stops only what `up` started.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from cluster.startup.ray_auth import apply_token_auth_default
from cluster.startup.serve_tuning import with_serve_tuning
from domain.exit_codes import HeadUnavailable

if TYPE_CHECKING:
    import psutil

LOCAL_HEAD_MARKER = "local_head.json"


class LocalHeadConfig(BaseModel):
    """How `switchyard up` starts a single-machine Ray head."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    port: int = Field(6379, ge=1024, le=65535)
    # Serve's controller, proxy, gateway and one replica per model each hold a logical CPU;
    # a 2-core box must advertise more than it has or replicas are never scheduled.
    num_cpus: int = Field(8, ge=1, le=1024)
    standin_slots: int = Field(
        4, ge=0, le=1024, description="CPU stand-in accelerator slots this head declares"
    )
    standin_resource: str = "accel_slot"
    num_gpus: int | None = Field(
        None,
        ge=0,
        le=1024,
        description="GPUs the raylet that hosts engines declares (`up --num-gpus`); None: the "
        "GPUs CUDA would show on this machine (NVML's, as CUDA_VISIBLE_DEVICES limits them). "
        "A fault-tolerant head's own raylet declares none (its data node has them)",
    )
    dashboard_host: str = "127.0.0.1"
    dashboard_port: int = Field(8265, ge=1024, le=65535)
    node_ip_address: str = "127.0.0.1"
    dashboard_agent_port: int | None = Field(
        None,
        ge=1024,
        le=65535,
        description="job agent HTTP port; None picks a free one (Ray's default 52365 clashes "
        "when two Ray clusters share a machine, and then `ray job submit` finds no agent)",
    )
    gcs_store: str | None = Field(
        None,
        description="where the GCS keeps its tables (`--gcs-store`: local, redis://HOST:PORT "
        "or rocksdb:PATH); None keeps them in the GCS's memory (no fault tolerance)",
    )
    gcs_store_password_env: str | None = Field(
        None, description="the variable holding the Redis password (`--gcs-store-password-env`)"
    )
    gcs_reconnect_timeout_s: int = Field(
        600,
        ge=60,
        le=86400,
        description="with a store: how long raylets wait for a GCS that went away",
    )
    serve_tuning: bool = Field(
        True,
        description="start Ray with Switchyard's Ray Serve settings "
        "(cluster/startup/serve_tuning.py); False keeps Ray's defaults (the benchmarks' "
        "baseline for Ray Serve LLM)",
    )


@dataclass(frozen=True)
class RayConnection:
    address: str
    started_local_head: bool
    dashboard_url: str | None
    reused: bool = False
    """The local head was already running (an earlier `up` on this state directory)."""


def _ray_cli() -> str:
    beside = Path(sys.executable).with_name("ray")
    if beside.exists():
        return str(beside)
    found = shutil.which("ray")
    if found is None:
        raise RuntimeError("the `ray` command is not installed beside this Python")
    return found


def start_local_head(config: LocalHeadConfig, state_dir: Path) -> RayConnection:
    """Start a Ray head on this machine (idempotent: reuses one Switchyard started).

    The head runs with Ray's token authentication (`RAY_AUTH_MODE=token`, the token in
    ~/.ray/auth_token), so only local users holding the token can drive it.
    """
    marker = state_dir / LOCAL_HEAD_MARKER
    address = f"{config.node_ip_address}:{config.port}"
    dashboard_url = f"http://{config.dashboard_host}:{config.dashboard_port}"
    enable_token_auth()
    if marker.exists() and _head_alive(address):
        return RayConnection(
            address, started_local_head=True, dashboard_url=dashboard_url, reused=True
        )
    fault_tolerant = config.gcs_store is not None
    slots = {config.standin_resource: config.standin_slots} if config.standin_slots else {}
    gpus = machine_gpus() if config.num_gpus is None else config.num_gpus
    # A fault-tolerant head runs the control plane only: its slots and GPUs go to the data
    # node (data_node.py), so no engine is placed on the head. Every raylet states its GPUs:
    # left to count them itself, each raylet on this machine would count all of them.
    resources = {} if fault_tolerant else slots
    command = [
        _ray_cli(),
        "start",
        "--head",
        f"--port={config.port}",
        f"--node-ip-address={config.node_ip_address}",
        f"--num-cpus={config.num_cpus}",
        f"--num-gpus={0 if fault_tolerant else gpus}",
        f"--resources={json.dumps(resources)}",
        "--include-dashboard=true",
        f"--dashboard-host={config.dashboard_host}",
        f"--dashboard-port={config.dashboard_port}",
        f"--dashboard-agent-listen-port={config.dashboard_agent_port or free_port()}",
        "--disable-usage-stats",
    ]
    # Jobs (`ray job submit -- switchyard ...`) inherit the head's environment: put this
    # installation's scripts first on PATH so `switchyard` resolves to the same install.
    env = with_serve_tuning(os.environ) if config.serve_tuning else dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    password_args = _fault_tolerant_head(config, state_dir, env) if fault_tolerant else []
    try:
        result = subprocess.run(
            command + password_args, capture_output=True, text=True, check=False, env=env
        )
    except KeyboardInterrupt:
        # `ray start` may have launched the head's daemons already: record their session so
        # `down` (run by the interrupted `up`) finds and stops them.
        if _session_dir_of_head(config.port) is not None:
            _record_head(state_dir, marker, address, dashboard_url, config.port)
        raise
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-5:]
        if config.gcs_store is not None:
            from cluster.startup.fault_tolerant_head import forget_store

            forget_store(state_dir)  # no head to keep its tables for: the local Redis goes
        raise RuntimeError("`ray start --head` failed: " + " | ".join(tail))
    _record_head(state_dir, marker, address, dashboard_url, config.port)
    if fault_tolerant:
        _start_control_and_data(config, state_dir, command, env, address, slots, gpus)
    return RayConnection(address, started_local_head=True, dashboard_url=dashboard_url)


def machine_gpus() -> int:
    """The GPUs an engine on this machine could open: NVML's (or nvidia-smi's), limited to
    CUDA_VISIBLE_DEVICES where it is set, as Ray's own count would be."""
    from cluster.inventory.local_probe import read_gpus

    return visible_count(len(read_gpus([]).devices), os.environ.get("CUDA_VISIBLE_DEVICES"))


def visible_count(devices: int, cuda_visible_devices: str | None) -> int:
    """`devices` GPUs as CUDA_VISIBLE_DEVICES leaves them (unset: all; empty: none)."""
    if cuda_visible_devices is None:
        return devices
    named = [d for d in cuda_visible_devices.split(",") if d.strip()]
    return min(devices, len(named))


def _fault_tolerant_head(
    config: LocalHeadConfig, state_dir: Path, env: dict[str, str]
) -> list[str]:
    """The store's variables into `env` (a local Redis started first); extra `ray start`
    arguments (the password, which Ray passes on to `gcs_server` on its command line)."""
    from cluster.startup.fault_tolerant_head import head_environment, prepare_store, store_password
    from domain.gcs_store import parse_gcs_store

    assert config.gcs_store is not None
    password = store_password(config.gcs_store_password_env)
    record = prepare_store(
        state_dir,
        parse_gcs_store(config.gcs_store),
        config.gcs_reconnect_timeout_s,
        config.gcs_store_password_env,
    )
    env.update(head_environment(record))
    return [f"--redis-password={password}"] if password else []


def _start_control_and_data(
    config: LocalHeadConfig,
    state_dir: Path,
    head_command: list[str],
    env: dict[str, str],
    address: str,
    slots: dict[str, int],
    gpus: int,
) -> None:
    """Record how the head was started and which processes are its own (before any other
    node's join the session), start the data node, then the supervisor, which restarts
    the head from that record with the head's environment (the password stays in the
    variable that names it, never in a file)."""
    from cluster.startup.data_node import (
        data_node_command,
        data_node_environment,
        start_data_node,
    )
    from cluster.startup.fault_tolerant_head import forget_store, record_head_start
    from cluster.startup.head_supervisor import start_supervisor

    record_head_start(state_dir, head_command, local_head_processes(state_dir))
    try:
        start_data_node(
            data_node_command(
                _ray_cli(),
                head_address=address,
                node_ip_address=config.node_ip_address,
                num_cpus=config.num_cpus,
                num_gpus=gpus,
                resources=slots,
                dashboard_agent_port=free_port(),
            ),
            data_node_environment(env),
        )
    except Exception:
        # A head nobody can send traffic to is not left behind, nor its store.
        stop_local_head(state_dir)
        forget_store(state_dir)
        raise
    start_supervisor(state_dir, env)


def _record_head(
    state_dir: Path, marker: Path, address: str, dashboard_url: str, port: int
) -> None:
    session_dir = _session_dir_of_head(port)
    state_dir.mkdir(parents=True, exist_ok=True)
    record = {"address": address, "dashboard_url": dashboard_url, "session_dir": session_dir}
    marker.write_text(json.dumps(record))


def enable_token_auth() -> None:
    """Use Ray token auth for clusters Switchyard starts, generating the token once."""
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    if os.environ["RAY_AUTH_MODE"] == "token":
        subprocess.run(
            [_ray_cli(), "get-auth-token", "--generate"],
            capture_output=True,
            check=False,
            timeout=60,
        )


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("", 0))
        port: int = sock.getsockname()[1]
        return port


def _head_alive(address: str) -> bool:
    result = subprocess.run(
        [_ray_cli(), "status", f"--address={address}"],
        capture_output=True,
        check=False,
        timeout=60,
    )
    return result.returncode == 0


def _session_dir_of_head(port: int) -> str | None:
    """The session directory of the head whose GCS listens on `port` (from its command line)."""
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if any(arg == f"--gcs_server_port={port}" for arg in cmdline):
            for arg in cmdline:
                if arg.startswith("--log_dir="):
                    return str(Path(arg.removeprefix("--log_dir=")).parent)
    return None


def local_head_processes(state_dir: Path) -> list[psutil.Process]:
    """Every process of the head `up` started here: those naming its session directory
    (head daemons, workers) and their children (replicas, vLLM engine processes); [] when
    Switchyard started no head. Found by session, never by name, so other Ray clusters on
    the machine are never touched."""
    import psutil

    marker = state_dir / LOCAL_HEAD_MARKER
    if not marker.exists():
        return []
    head = json.loads(marker.read_text())
    session_dir = head.get("session_dir")
    if not session_dir:
        return []
    gcs_port = str(head.get("address") or "").rpartition(":")[2]
    roots = [
        root
        for root in psutil.process_iter(["cmdline"])
        if is_head_process(root.info.get("cmdline") or [], session_dir, gcs_port)
    ]
    return with_descendants(roots)


def is_head_process(cmdline: list[str], session_dir: str, gcs_port: str) -> bool:
    """A process of the head: it names the session directory, or it is the Ray client
    server `ray start --head` starts beside the GCS, whose command line names only the
    GCS's address (missed, it outlived every `down` and held its port)."""
    if any(session_dir in arg for arg in cmdline):
        return True
    return (
        bool(gcs_port)
        and "ray.util.client.server" in cmdline
        and any(a.startswith("--address=") and a.endswith(f":{gcs_port}") for a in cmdline)
    )


def with_descendants(roots: Iterable[psutil.Process]) -> list[psutil.Process]:
    """`roots` and every process under them, each once (one that is gone is skipped). One
    pass over the process table: psutil's `children()` reads all of it per call, which
    for every process of a session took the supervisor a minute on a loaded machine."""
    import psutil

    children: dict[int, list[psutil.Process]] = {}
    for proc in psutil.process_iter(["ppid"]):
        children.setdefault(proc.info["ppid"], []).append(proc)
    found: dict[int, psutil.Process] = {}
    pending = list(roots)
    while pending:
        proc = pending.pop(0)
        if proc.pid not in found:
            found[proc.pid] = proc
            pending.extend(children.get(proc.pid, ()))
    return list(found.values())


@dataclass(frozen=True)
class LocalHeadState:
    """What is left of the head `up` started here, read from its processes (no Ray call,
    so it answers at once whatever state the head is in)."""

    recorded: bool
    """`up` recorded a head it started (the marker file exists)."""
    session_dir: str | None
    processes: int
    gcs_alive: bool
    raylet_alive: bool

    def describe(self) -> str:
        if not self.recorded:
            return "no local Ray head was started here"
        if self.processes == 0:
            return "the local Ray head is already gone (no process of its session runs)"
        if self.gcs_alive and self.raylet_alive:
            return f"the local Ray head is running ({self.processes} processes)"
        parts = [
            "GCS running" if self.gcs_alive else "GCS gone",
            "raylet running" if self.raylet_alive else "raylet gone",
        ]
        return f"the local Ray head is half dead ({', '.join(parts)}; {self.processes} processes)"


def local_head_state(state_dir: Path) -> LocalHeadState:
    marker = state_dir / LOCAL_HEAD_MARKER
    if not marker.exists():
        return LocalHeadState(False, None, 0, gcs_alive=False, raylet_alive=False)
    session_dir = json.loads(marker.read_text()).get("session_dir")
    names = set()
    procs = local_head_processes(state_dir)
    for proc in procs:
        with contextlib.suppress(Exception):
            name = proc.name()
            # The head's raylet, not a data node's (data_node.py), which shares the session.
            if name != "raylet" or "--head" in proc.cmdline():
                names.add(name)
    return LocalHeadState(
        True,
        session_dir,
        len(procs),
        gcs_alive="gcs_server" in names,
        raylet_alive="raylet" in names,
    )


def gcs_reachable(address: str, timeout_s: float = 1.0) -> bool:
    """Whether something accepts connections on the cluster address (a GCS that is gone
    refuses at once; no Ray call, so it never blocks past `timeout_s`)."""
    import socket

    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def gcs_gone_within(address: str, wait_s: float, *, poll_s: float = 0.5) -> bool:
    """Whether the cluster at `address` stops accepting connections within `wait_s`: a Ray
    call that failed because the cluster was being stopped (`down` from another terminal
    stops the actors first, the GCS a moment later) is told from any other failure."""
    import time

    deadline = time.monotonic() + wait_s
    while gcs_reachable(address):
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


def stop_local_head(state_dir: Path, *, grace_s: float = 15.0) -> bool:
    """Stop the head `up` started; False if Switchyard did not start one.

    Not `ray stop`: that kills every Ray cluster on the machine. We stop only the
    processes of our head's session (found by its session directory) and their children
    (workers, replicas and vLLM engine processes).
    """

    marker = state_dir / LOCAL_HEAD_MARKER
    if not marker.exists():
        return False
    procs = local_head_processes(state_dir)
    # Two waves: the GCS outlives its raylets and workers by waiting for them (terminated
    # together, it lingers past the grace), and the autoscaler monitor ignores SIGTERM; both
    # hold no state a local head needs, so they get a short grace once the others are gone.
    last = [p for p in procs if _is_gcs_or_monitor(p)]
    _terminate(procs=[p for p in procs if p not in last], grace_s=grace_s)
    _terminate(procs=last, grace_s=_LAST_WAVE_GRACE_S)
    marker.unlink(missing_ok=True)
    return True


_LAST_WAVE_GRACE_S = 3.0


def _is_gcs_or_monitor(proc: psutil.Process) -> bool:
    import psutil

    try:
        return proc.name() == "gcs_server" or any("monitor.py" in a for a in proc.cmdline())
    except psutil.Error:
        return False


def _terminate(*, procs: list[psutil.Process], grace_s: float) -> None:
    """SIGTERM, then SIGKILL whatever is left after `grace_s`."""
    import psutil

    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(alive, timeout=5)


HEAD_CHECK_TIMEOUT_S = 3.0


def disconnect() -> None:
    """Detach this process from the cluster if it joined one (what it started keeps
    running); nothing otherwise, and Ray is not imported for it.

    Every command calls it before exiting. Ray's exit hook would do the same, but first
    sleeps half a second for the driver's log lines to print (`ray/_private/worker.py`
    `shutdown(_exiting_interpreter=True)`); our drivers join with `log_to_driver=False`, so
    there are none to wait for, and each command would pay it.
    """
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def connect(address: str) -> None:
    """Attach this process to the cluster as a driver in Switchyard's namespace.

    Call it before anything imports `ray`: Ray reads RAY_AUTH_MODE once, at import.
    """
    apply_token_auth_default()
    import ray

    from serve_apps.registry.registry_actor import SWITCHYARD_NAMESPACE

    if ray.is_initialized():
        return
    if not gcs_reachable(address, timeout_s=HEAD_CHECK_TIMEOUT_S):
        # Refused at once: ray.init would wait its GCS timeout (a minute) before failing.
        raise HeadUnavailable(address)
    ray.init(
        address=address,
        namespace=SWITCHYARD_NAMESPACE,
        logging_level=logging.WARNING,
        log_to_driver=False,
    )


def cluster_gpus() -> int:
    """The `GPU`s Ray's nodes declare in all (this process joined the cluster)."""
    import ray

    resources: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
    return int(resources.get("GPU", 0))


def advertised_address() -> str:
    """The GCS address of the cluster this process has joined, as the cluster advertises it
    (a head started for 127.0.0.1 advertises the machine's address)."""
    import ray

    address: str = ray.get_runtime_context().gcs_address
    return address
