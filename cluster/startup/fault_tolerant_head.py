"""A local head whose GCS keeps its tables in a store (`switchyard up --gcs-store`).

What `up` adds to `ray start --head` for it, and the record in the state directory that
the head supervisor (head_supervisor.py), `status` and `down` read:

- the store: `RAY_REDIS_ADDRESS` (`ray start` has no flag for it) and a namespace of this
  head's own, so two heads sharing a Redis never read each other's tables, or Ray's RocksDB
  store (`RAY_gcs_storage=rocksdb`, `RAY_gcs_storage_path`);
- the password, read from the variable `--gcs-store-password-env` names and handed to
  `ray start --redis-password`; Ray passes it on to `gcs_server` as a command-line
  argument, so it is visible in the head's process list (docs/reliability.md);
- `RAY_gcs_rpc_server_reconnect_timeout_s`: how long raylets and workers wait for a GCS
  that went away before they exit and take their actors with them (Ray's 60 s, KubeRay's
  600 s for a fault-tolerant head);
- for `--gcs-store local`, a `redis-server` beside the head, its append-only file in the
  state directory, so a Redis restart loses nothing either.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from cluster.atomic_file import atomic_write_text
from domain.exit_codes import UserInputError
from domain.gcs_store import GcsStore, GcsStoreKind, parse_gcs_store

if TYPE_CHECKING:
    import psutil

HEAD_RECORD = "fault_tolerant_head.json"
LOCAL_REDIS_DIR = "gcs-store"
RECONNECT_TIMEOUT_S = 600
"""KubeRay's value for a fault-tolerant head: room for the head to restart."""
_REDIS_START_S = 15.0


class Outage(BaseModel):
    """One time a head process died and the supervisor started it again."""

    model_config = ConfigDict(extra="forbid")

    process: str
    died_at: float
    """Unix time the supervisor saw it gone."""
    recovered_at: float | None = None
    """Unix time it answered again; None while it is still down."""


class RecordedProcess(BaseModel):
    """A process of the head, told from a later one with the same pid by its start time."""

    model_config = ConfigDict(extra="forbid")

    pid: int
    create_time: float


class FaultTolerantHeadRecord(BaseModel):
    """`fault_tolerant_head.json` in the state directory: written by `up`, then by the
    supervisor as outages come and go."""

    model_config = ConfigDict(extra="forbid")

    gcs_store: str
    """The store as `--gcs-store` names it (no password)."""
    storage_namespace: str
    password_env: str | None = None
    """The variable that held the Redis password (its name only; `down` reads it again)."""
    reconnect_timeout_s: int = RECONNECT_TIMEOUT_S
    redis_pid: int | None = None
    redis_port: int | None = None
    redis_command: list[str] = Field(default_factory=list)
    supervisor_pid: int | None = None
    head_command: list[str] = Field(default_factory=list)
    """`ray start --head` as `up` ran it, without the password (the supervisor adds it
    again from `password_env`): what restarts the whole head."""
    head_processes: list[RecordedProcess] = Field(default_factory=list)
    """The processes `ray start --head` started (the GCS, the head's raylet, the dashboard,
    the monitors), before any other node joined the session: the head's own, as against
    the data node's, which share its session directory on one machine."""
    outages: list[Outage] = Field(default_factory=list)

    @property
    def store(self) -> GcsStore:
        store = parse_gcs_store(self.gcs_store)
        if store.kind is GcsStoreKind.LOCAL and self.redis_port:
            return GcsStore(GcsStoreKind.LOCAL, host="127.0.0.1", port=self.redis_port)
        return store

    def last_recovered_at(self) -> float | None:
        done = [o.recovered_at for o in self.outages if o.recovered_at is not None]
        return max(done) if done else None

    def down_now(self) -> list[Outage]:
        return [o for o in self.outages if o.recovered_at is None]


def read_head_record(state_dir: Path) -> FaultTolerantHeadRecord | None:
    path = state_dir / HEAD_RECORD
    if not path.exists():
        return None
    return FaultTolerantHeadRecord.model_validate_json(path.read_text())


def write_head_record(state_dir: Path, record: FaultTolerantHeadRecord) -> None:
    atomic_write_text(state_dir / HEAD_RECORD, record.model_dump_json(indent=2))


def record_head_start(
    state_dir: Path, head_command: list[str], processes: list[psutil.Process]
) -> None:
    """Remember how the head was started and which processes it started."""
    record = read_head_record(state_dir)
    if record is None:
        return
    record.head_command = list(head_command)
    record.head_processes = recorded(processes)
    write_head_record(state_dir, record)


def recorded(processes: list[psutil.Process]) -> list[RecordedProcess]:
    import psutil

    found = []
    for proc in processes:
        try:
            found.append(RecordedProcess(pid=proc.pid, create_time=proc.create_time()))
        except psutil.Error:
            continue
    return found


def alive(process: RecordedProcess) -> psutil.Process | None:
    """The recorded process if it still runs (not a later one that reused its pid)."""
    import psutil

    try:
        proc = psutil.Process(process.pid)
        if abs(proc.create_time() - process.create_time) > 0.01:
            return None
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except psutil.Error:
        return None


def surviving_head_processes(record: FaultTolerantHeadRecord) -> list[psutil.Process]:
    """What still runs of the processes the head started, and of everything they run (the
    head raylet's workers: Serve's controller, the manager, the registry)."""
    from cluster.startup.ray_runtime import with_descendants

    running = (alive(entry) for entry in record.head_processes)
    return with_descendants(proc for proc in running if proc is not None)


def store_password(env_name: str | None) -> str | None:
    """The Redis password from the variable `--gcs-store-password-env` names."""
    if env_name is None:
        return None
    password = os.environ.get(env_name)
    if not password:
        raise UserInputError(
            f"--gcs-store-password-env: the variable {env_name} is not set or empty"
        )
    return password


def local_redis_command(state_dir: Path, port: int) -> list[str]:
    server = shutil.which("redis-server")
    if server is None:
        raise UserInputError(
            "--gcs-store local: redis-server is not installed (Debian: apt-get install "
            "redis-server; `make setup` installs it)"
        )
    data = state_dir / LOCAL_REDIS_DIR
    data.mkdir(parents=True, exist_ok=True)
    # The GCS's tables hold what the cluster holds, Serve's deployment arguments (the
    # gateway's API keys) among them: as private as Ray's token file.
    data.chmod(0o700)
    return [
        server,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        str(data),
        # Every write on disk before it is acknowledged: a Redis restart loses nothing.
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--save",
        "",
        "--logfile",
        str(data / "redis.log"),
    ]


def spawn_redis(command: list[str]) -> int:
    """Start `redis-server` detached (it outlives `up`); its pid once it accepts."""
    from cluster.startup.ray_runtime import gcs_reachable

    proc = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        umask=0o077,  # its files owner-only, as their directory
    )
    port = command[command.index("--port") + 1]
    deadline = time.monotonic() + _REDIS_START_S
    while not gcs_reachable(f"127.0.0.1:{port}", timeout_s=0.5):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"redis-server did not start on port {port} ({command[0]})")
        time.sleep(0.1)
    return proc.pid


def prepare_store(
    state_dir: Path, store: GcsStore, reconnect_timeout_s: int, password_env: str | None
) -> FaultTolerantHeadRecord:
    """Start what the store needs (a local Redis) and the record naming it."""
    state_dir.mkdir(parents=True, exist_ok=True)
    record = FaultTolerantHeadRecord(
        gcs_store=store.to_text(),
        password_env=password_env,
        storage_namespace=f"switchyard-{uuid.uuid4().hex[:12]}",
        reconnect_timeout_s=reconnect_timeout_s,
    )
    if store.kind is GcsStoreKind.LOCAL:
        from cluster.startup.ray_runtime import free_port

        port = free_port()
        command = local_redis_command(state_dir, port)
        record.redis_command = command
        record.redis_port = port
        record.redis_pid = spawn_redis(command)
    if store.kind is GcsStoreKind.ROCKSDB and store.path is not None:
        store.path.mkdir(parents=True, exist_ok=True)
    write_head_record(state_dir, record)
    return record


def head_environment(record: FaultTolerantHeadRecord) -> dict[str, str]:
    """The variables `ray start --head` runs with for this store."""
    env = {
        "RAY_gcs_rpc_server_reconnect_timeout_s": str(record.reconnect_timeout_s),
        "RAY_external_storage_namespace": record.storage_namespace,
    }
    store = record.store
    if store.kind is GcsStoreKind.ROCKSDB:
        env["RAY_gcs_storage"] = "rocksdb"
        env["RAY_gcs_storage_path"] = str(store.path)
    else:
        env["RAY_REDIS_ADDRESS"] = store.redis_address
    return env


def forget_store(state_dir: Path) -> str | None:
    """`down`: the store's tables of this head go (a later head must start empty), and a
    local Redis stops. What could not be deleted, if anything."""
    from serve_apps.internals import delete_gcs_tables_in_redis

    record = read_head_record(state_dir)
    if record is None:
        return None
    store = record.store
    problem = None
    if store.kind is GcsStoreKind.LOCAL:
        _stop_pid(record.redis_pid)
        shutil.rmtree(state_dir / LOCAL_REDIS_DIR, ignore_errors=True)
    elif store.kind is GcsStoreKind.REDIS:
        password = os.environ.get(record.password_env) if record.password_env else None
        try:
            delete_gcs_tables_in_redis(store.host, store.port, password, record.storage_namespace)
        except Exception as exc:
            problem = (
                f"the GCS tables in {store.describe()} (namespace {record.storage_namespace}) "
                f"were not deleted: {exc}"
            )
    elif store.path is not None:
        shutil.rmtree(store.path, ignore_errors=True)
    (state_dir / HEAD_RECORD).unlink(missing_ok=True)
    return problem


def _stop_pid(pid: int | None) -> None:
    import psutil

    if pid is None:
        return
    try:
        proc = psutil.Process(pid)
        proc.terminate()
        proc.wait(10)
    except psutil.TimeoutExpired:
        proc.kill()
    except psutil.Error:
        return


def describe_head(record: FaultTolerantHeadRecord | None) -> dict[str, Any]:
    """`status`'s view of the head, from the record alone (it answers with the GCS away)."""
    if record is None:
        return {"fault_tolerant": False}
    import psutil

    supervised = record.supervisor_pid is not None and psutil.pid_exists(record.supervisor_pid)
    down = record.down_now()
    return {
        "fault_tolerant": True,
        "gcs_store": record.store.describe(),
        "reconnect_timeout_s": record.reconnect_timeout_s,
        "supervisor_running": supervised,
        "outages": len(record.outages),
        "recovering": [o.process for o in down],
        "last_recovered_at": record.last_recovered_at(),
    }
