"""The supervisor of a fault-tolerant local head: when the head's GCS dies, start it again.

`up --gcs-store ...` starts it as a detached process (`python -m
cluster.startup.head_supervisor STATE_DIR`) and records its pid in the state directory's
`fault_tolerant_head.json`; `down` stops it before the head. Every half second it looks at
the head's processes (found by the head's session directory, as `down` finds them):

- it remembers how the running `gcs_server` was started (command line, environment,
  working directory); when that process is gone it starts the same command again: same
  address and port, same store, same session. The new GCS recovers its tables from the
  store, the raylets reconnect (they wait `RAY_gcs_rpc_server_reconnect_timeout_s`), and
  running actors and replicas never stopped;
- for `--gcs-store local`, when the `redis-server` is gone it starts it again on the same
  port and directory (its append-only file keeps every write).

Each outage and recovery is logged (`head_supervisor.log` in the state directory) and
recorded (`outages` in the record, which `status` shows). A dead head raylet is logged,
not restarted: the head's raylet hosts the manager, the registry and Serve's controller,
and restarting it is the operator's restart of the whole head (docs/reliability.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from cluster.startup.fault_tolerant_head import (
    Outage,
    read_head_record,
    spawn_redis,
    write_head_record,
)
from cluster.startup.ray_runtime import LOCAL_HEAD_MARKER, gcs_reachable, local_head_processes

log = logging.getLogger("switchyard.head_supervisor")
LOG_FILE = "head_supervisor.log"
POLL_S = 0.5
GCS_START_S = 60.0


@dataclass(frozen=True)
class ProcessSpec:
    """How to start a process again exactly as it was."""

    command: list[str]
    env: dict[str, str]
    cwd: str


def _spec_of(proc: psutil.Process) -> ProcessSpec | None:
    try:
        return ProcessSpec(proc.cmdline(), proc.environ(), proc.cwd())
    except psutil.Error:
        return None


def _head_process(state_dir: Path, name: str) -> psutil.Process | None:
    for proc in local_head_processes(state_dir):
        with contextlib.suppress(psutil.Error):
            if proc.name() == name and proc.status() != psutil.STATUS_ZOMBIE:
                return proc
    return None


def _gcs_address(spec: ProcessSpec) -> str:
    def arg(name: str) -> str:
        for item in spec.command:
            if item.startswith(f"--{name}="):
                return item.split("=", 1)[1]
        return ""

    return f"{arg('node-ip-address') or '127.0.0.1'}:{arg('gcs_server_port')}"


class HeadSupervisor:
    def __init__(self, state_dir: Path) -> None:
        self._state_dir = state_dir
        self._gcs: ProcessSpec | None = None
        self._raylet_seen = False
        self._stopping = False

    def stop(self) -> None:
        self._stopping = True

    def _note_outage(self, process: str) -> None:
        record = read_head_record(self._state_dir)
        if record is None:
            return
        record.outages.append(Outage(process=process, died_at=time.time()))
        write_head_record(self._state_dir, record)

    def _note_recovery(self, process: str) -> None:
        record = read_head_record(self._state_dir)
        if record is None:
            return
        for outage in record.outages:
            if outage.process == process and outage.recovered_at is None:
                outage.recovered_at = time.time()
        write_head_record(self._state_dir, record)

    def check_once(self) -> None:
        self._check_redis()
        self._check_gcs()
        self._check_raylet()

    def _check_redis(self) -> None:
        record = read_head_record(self._state_dir)
        if record is None or not record.redis_command or record.redis_pid is None:
            return
        if psutil.pid_exists(record.redis_pid) and not _is_zombie(record.redis_pid):
            return
        log.warning(
            "the GCS store's redis-server (pid %d) is gone; restarting it", record.redis_pid
        )
        self._note_outage("redis-server")
        started = time.monotonic()
        pid = spawn_redis(record.redis_command)
        record = read_head_record(self._state_dir)
        if record is not None:
            record.redis_pid = pid
            write_head_record(self._state_dir, record)
        self._note_recovery("redis-server")
        log.warning("redis-server is back (pid %d) after %.1f s", pid, time.monotonic() - started)

    def _check_gcs(self) -> None:
        running = _head_process(self._state_dir, "gcs_server")
        if running is not None:
            if self._gcs is None:
                self._gcs = _spec_of(running)
            return
        if self._gcs is None:
            return  # never seen running: nothing to restart from
        spec = self._gcs
        address = _gcs_address(spec)
        log.warning("the head's GCS (%s) is gone; starting it again", address)
        self._note_outage("gcs_server")
        started = time.monotonic()
        subprocess.Popen(
            spec.command,
            env=spec.env,
            cwd=spec.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        while not gcs_reachable(address, timeout_s=0.5):
            if time.monotonic() - started > GCS_START_S:
                log.error("the GCS did not come back in %.0f s; trying again", GCS_START_S)
                return
            time.sleep(0.1)
        self._note_recovery("gcs_server")
        log.warning("the GCS is back at %s after %.1f s", address, time.monotonic() - started)

    def _check_raylet(self) -> None:
        alive = _head_process(self._state_dir, "raylet") is not None
        if self._raylet_seen and not alive:
            log.error(
                "the head's raylet is gone: the head must be restarted as a whole "
                "(`switchyard down`, then `up` with the same --state-dir and --gcs-store)"
            )
            self._note_outage("raylet")
        self._raylet_seen = alive

    def run(self) -> None:
        log.info("supervising the head recorded in %s", self._state_dir)
        while not self._stopping and (self._state_dir / LOCAL_HEAD_MARKER).exists():
            try:
                self.check_once()
            except Exception:
                log.exception("supervision pass failed; retrying")
            time.sleep(POLL_S)
        log.info("stopped (the head's record is gone, or asked to stop)")


def _is_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def start_supervisor(state_dir: Path) -> int:
    """Start the supervisor detached (it outlives `up`) and record its pid."""
    log_file = (state_dir / LOG_FILE).open("a")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cluster.startup.head_supervisor", str(state_dir)],
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    record = read_head_record(state_dir)
    if record is not None:
        record.supervisor_pid = proc.pid
        write_head_record(state_dir, record)
    return proc.pid


def stop_supervisor(state_dir: Path) -> None:
    """Stop the supervisor first: it would start again what `down` stops."""
    record = read_head_record(state_dir)
    if record is None or record.supervisor_pid is None:
        return
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(record.supervisor_pid)
        if "head_supervisor" in " ".join(proc.cmdline()):
            proc.terminate()
            try:
                proc.wait(10)
            except psutil.TimeoutExpired:
                proc.kill()


def main() -> None:
    state_dir = Path(sys.argv[1])
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stdout
    )
    supervisor = HeadSupervisor(state_dir)
    signal.signal(signal.SIGTERM, lambda *_: supervisor.stop())
    os.environ.pop("RAY_ADDRESS", None)
    supervisor.run()


if __name__ == "__main__":
    main()
