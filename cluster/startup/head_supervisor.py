"""The supervisor of a fault-tolerant local head: when the head's GCS, or the whole head,
dies, start it again.

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
  port and directory (its append-only file keeps every write);
- when the head's raylet is gone, the whole head goes with it: the supervisor stops what
  is left of the processes the head started (the record's `head_processes`), then runs
  the head's `ray start --head` again (the record's `head_command`, in the head's
  environment, which the supervisor was started with). Ray reads the session's name back
  from the store, so the head comes back in the same session, at the same address and
  ports; the GCS marks the old head node dead, and Ray restarts the actors it hosted
  (Serve's controller, the fleet manager, the registry) on the new one. The data node's
  gateway and engines (data_node.py) never stopped.

Each outage and recovery is logged (`head_supervisor.log` in the state directory) and
recorded (`outages` in the record, which `status` shows).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

from cluster.startup.fault_tolerant_head import (
    FaultTolerantHeadRecord,
    Outage,
    read_head_record,
    recorded,
    spawn_redis,
    surviving_head_processes,
    write_head_record,
)
from cluster.startup.ray_runtime import LOCAL_HEAD_MARKER, gcs_reachable, local_head_processes

log = logging.getLogger("switchyard.head_supervisor")
LOG_FILE = "head_supervisor.log"
POLL_S = 0.5
GCS_START_S = 60.0
HEAD_START_S = 180.0
RETRY_PAUSE_S = 5.0
HEAD_START_LOG = "head_start.log"
"""The last `ray start --head`'s output, in the state directory."""
HEAD_NICENESS = -10
"""The CPU priority of the supervisor and of what it starts (a GCS, a whole head), where it
may raise it (root, or CAP_SYS_NICE): on one machine the data node's engines can hold every
core, and the new raylet aborts when its dashboard agent, starved, misses Ray's fixed wait
for its ports (`RAY_agent_register_timeout_ms` does not extend that wait in Ray 2.60). The
head idles but for its starts, so its priority costs the engines nothing in steady state."""


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


def _is_head_raylet(proc: psutil.Process) -> bool:
    """The head's raylet; the data node's raylet shares the session on one machine."""
    with contextlib.suppress(psutil.Error):
        return (
            proc.name() == "raylet"
            and proc.status() != psutil.STATUS_ZOMBIE
            and "--head" in proc.cmdline()
        )
    return False


def _gcs_address(spec: ProcessSpec) -> str:
    def arg(name: str) -> str:
        for item in spec.command:
            if item.startswith(f"--{name}="):
                return item.split("=", 1)[1]
        return ""

    return f"{arg('node-ip-address') or '127.0.0.1'}:{arg('gcs_server_port')}"


class HeadStartAttempt:
    """`ray start --head` running, watched: it has failed as soon as the raylet it started
    dies. Why watch: on a loaded machine the new raylet can abort while it waits for its
    dashboard agent to report its ports (Ray waits a fixed few seconds per port), and
    `ray start` then waits minutes more before it says so, while the fleet has no head."""

    def __init__(self, command: list[str], log_path: Path) -> None:
        self.started_at = time.time()
        self._log_path = log_path
        with log_path.open("w") as out:
            self._proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_raise_priority,
            )
        self._seen: dict[int, tuple[psutil.Process, str]] = {}

    @property
    def children(self) -> list[psutil.Process]:
        """Every process seen under `ray start` while it ran (they outlive it)."""
        return [proc for proc, _ in self._seen.values()]

    def wait(self, timeout_s: float) -> str | None:
        """None once `ray start` has exited 0; else why the attempt failed (it is killed
        when its raylet dies or it runs past `timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        while True:
            self._look()
            code = self._proc.poll()
            if code is not None:
                return None if code == 0 else f"exit {code}: {self._tail()}"
            if any(name == "raylet" and not _running(p) for p, name in self._seen.values()):
                failure = "the raylet it started died (the session's raylet.err says why)"
            elif time.monotonic() > deadline:
                failure = f"it did not finish in {timeout_s:.0f} s"
            else:
                time.sleep(POLL_S)
                continue
            self._proc.kill()
            self._proc.wait()
            return failure

    def _look(self) -> None:
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self._proc.pid).children(recursive=True):
                if child.pid not in self._seen:
                    with contextlib.suppress(psutil.Error):
                        self._seen[child.pid] = (child, child.name())

    def _tail(self) -> str:
        lines = self._log_path.read_text(errors="replace").strip().splitlines()
        return " | ".join(lines[-5:])


class HeadSupervisor:
    def __init__(self, state_dir: Path) -> None:
        self._state_dir = state_dir
        self._gcs: ProcessSpec | None = None
        self._gcs_pid: int | None = None
        self._head_seen = False
        self._stopping = False
        # The processes watched, found by a scan of the session's processes only when the
        # one held is gone: a scan every pass cost more CPU than everything else the idle
        # head runs together.
        self._held: dict[str, psutil.Process] = {}

    def stop(self) -> None:
        self._stopping = True

    def _note_outage(self, process: str) -> None:
        record = read_head_record(self._state_dir)
        if record is None:
            return
        if any(o.process == process and o.recovered_at is None for o in record.outages):
            return  # the same outage, still open (a restart that is being retried)
        record.outages.append(Outage(process=process, died_at=time.time()))
        write_head_record(self._state_dir, record)

    def _note_recovery(self, *processes: str) -> None:
        record = read_head_record(self._state_dir)
        if record is None:
            return
        for outage in record.outages:
            if outage.process in processes and outage.recovered_at is None:
                outage.recovered_at = time.time()
        write_head_record(self._state_dir, record)

    def _find(self, what: str, scan: Callable[[], psutil.Process | None]) -> psutil.Process | None:
        held = self._held.get(what)
        if held is not None and _running(held):
            return held
        found = scan()
        if found is None:
            self._held.pop(what, None)
        else:
            self._held[what] = found
        return found

    def _gcs_process(self) -> psutil.Process | None:
        return self._find("gcs_server", lambda: _head_process(self._state_dir, "gcs_server"))

    def _head_raylet(self) -> psutil.Process | None:
        def scan() -> psutil.Process | None:
            found = (p for p in local_head_processes(self._state_dir) if _is_head_raylet(p))
            return next(found, None)

        return self._find("raylet", scan)

    def check_once(self) -> None:
        self._check_redis()
        if self._check_head():
            return
        self._check_gcs()

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
        running = self._gcs_process()
        if running is not None:
            if self._gcs is None or self._gcs_pid != running.pid:
                self._gcs = _spec_of(running)
                self._gcs_pid = running.pid
            return
        if self._gcs is None:
            return  # never seen running: nothing to restart from
        spec = self._gcs
        address = _gcs_address(spec)
        log.warning("the head's GCS (%s) is gone; starting it again", address)
        self._note_outage("gcs_server")
        started = time.monotonic()
        proc = subprocess.Popen(
            spec.command,
            env=spec.env,
            cwd=spec.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_raise_priority,
        )
        self._replace_recorded(self._gcs_pid, proc.pid)
        while not gcs_reachable(address, timeout_s=0.5):
            if time.monotonic() - started > GCS_START_S:
                log.error("the GCS did not come back in %.0f s; trying again", GCS_START_S)
                return
            time.sleep(0.1)
        self._note_recovery("gcs_server")
        log.warning("the GCS is back at %s after %.1f s", address, time.monotonic() - started)

    def _replace_recorded(self, old_pid: int | None, new_pid: int) -> None:
        """The restarted GCS is the head's, as the one it replaces was."""
        record = read_head_record(self._state_dir)
        if record is None:
            return
        kept = [p for p in record.head_processes if p.pid != old_pid]
        with contextlib.suppress(psutil.Error):
            kept += recorded([psutil.Process(new_pid)])
        record.head_processes = kept
        write_head_record(self._state_dir, record)

    def _check_head(self) -> bool:
        """True when the head's raylet is gone and the whole head was (or is being)
        started again; the GCS check waits for it."""
        if self._head_raylet() is not None:
            self._head_seen = True
            return False
        if not self._head_seen:
            return False
        record = read_head_record(self._state_dir)
        if record is None or not record.head_command:
            log.error(
                "the head's raylet is gone and the record says no way to start it again: "
                "restart the head as a whole (`switchyard down`, then `up` with the same "
                "--state-dir and --gcs-store)"
            )
            self._head_seen = False
            return False
        log.warning("the head's raylet is gone: starting the whole head again")
        self._note_outage("head")
        started_at = time.time()
        started = time.monotonic()
        self._stop_rest_of_head(record)
        if not self._start_head(record):
            time.sleep(RETRY_PAUSE_S)
            return True
        self._record_new_head(started_at)
        self._gcs = None
        self._note_recovery("head", "gcs_server")
        log.warning("the head is back after %.1f s", time.monotonic() - started)
        return True

    def _stop_rest_of_head(self, record: FaultTolerantHeadRecord) -> None:
        """What survives of the head's own processes (the GCS, the dashboard, the
        monitors) holds its ports: stopped, never the data node's."""
        doomed = {proc.pid: proc for proc in surviving_head_processes(record)}
        gcs = _head_process(self._state_dir, "gcs_server")
        if gcs is not None:
            doomed[gcs.pid] = gcs
        for proc in doomed.values():
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(list(doomed.values()), timeout=10)

    def _start_head(self, record: FaultTolerantHeadRecord) -> bool:
        """One attempt at `ray start --head`; True once the head's raylet runs. A failed
        attempt leaves nothing behind: what it started holds the head's ports, and every
        later attempt would fail on them ("Failed to bind ... already occupied")."""
        from serve_apps.internals import forget_bootstrap_address

        # The data node's raylet still names the head's address, which `ray start --head`
        # takes for a head already running when Ray's record of the last cluster says so.
        forget_bootstrap_address(self._advertised_address())
        command = list(record.head_command)
        if record.password_env:
            password = os.environ.get(record.password_env)
            if password:
                command.append(f"--redis-password={password}")
        attempt = HeadStartAttempt(command, self._state_dir / HEAD_START_LOG)
        failure = attempt.wait(HEAD_START_S)
        if failure is None and self._head_raylet() is None:
            failure = "it exited 0 but no raylet of the head runs"
        if failure is None:
            return True
        log.error("`ray start --head` failed; stopping what it started, then again: %s", failure)
        self._stop_started_since(attempt.started_at, attempt.children)
        return False

    def _stop_started_since(self, started_at: float, also: Iterable[psutil.Process]) -> None:
        """Stop the processes of a failed head start: those it started (`also`, seen while
        it ran) and the session's processes created since it began, never the data node's."""
        doomed = {p.pid: p for p in [*also, *self._started_since(started_at)]}
        for proc in doomed.values():
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(list(doomed.values()), timeout=10)
        self._held.clear()

    def _started_since(self, started_at: float) -> list[psutil.Process]:
        """The session's processes created since `started_at`, less the data node's
        (children of a raylet that is not the head's)."""
        session = local_head_processes(self._state_dir)
        theirs: set[int] = set()
        for proc in session:
            with contextlib.suppress(psutil.Error):
                if proc.name() == "raylet" and not _is_head_raylet(proc) and _running(proc):
                    theirs.add(proc.pid)
                    theirs.update(c.pid for c in proc.children(recursive=True))
        mine = []
        for proc in session:
            with contextlib.suppress(psutil.Error):
                if proc.pid not in theirs and proc.create_time() >= started_at - 1:
                    mine.append(proc)
        return mine

    def _advertised_address(self) -> str:
        """The GCS address the head advertised (the machine's address, where `up` asked
        for 127.0.0.1), read from the last `gcs_server` seen."""
        if self._gcs is not None:
            return _gcs_address(self._gcs)
        return ""

    def _record_new_head(self, started_at: float) -> None:
        """The processes started since the restart began are the head's own now."""
        record = read_head_record(self._state_dir)
        if record is not None:
            record.head_processes = recorded(self._started_since(started_at))
            write_head_record(self._state_dir, record)

    def run(self) -> None:
        log.info("supervising the head recorded in %s", self._state_dir)
        while not self._stopping and (self._state_dir / LOCAL_HEAD_MARKER).exists():
            try:
                self.check_once()
            except Exception:
                log.exception("supervision pass failed; retrying")
            time.sleep(POLL_S)
        log.info("stopped (the head's record is gone, or asked to stop)")


def _raise_priority() -> None:
    """In a child the supervisor starts, before it runs: HEAD_NICENESS where allowed, else
    as it is; and, for a child in a session of its own (the supervisor, a GCS), its
    session's scheduling group: where the kernel groups by session (autogroup), a
    niceness only orders processes within their group, and it is the group's that
    competes with the engines' sessions."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, HEAD_NICENESS)
    if os.getsid(0) == os.getpid():  # its own new session: else the caller's whole one
        with contextlib.suppress(OSError):
            Path("/proc/self/autogroup").write_text(str(HEAD_NICENESS))


def _running(proc: psutil.Process) -> bool:
    """Still the process it was (not a later one with its pid), and not a zombie."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _is_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def start_supervisor(state_dir: Path, head_env: Mapping[str, str]) -> int:
    """Start the supervisor detached (it outlives `up`) in the head's environment (what
    it starts the head again with) and record its pid."""
    log_file = (state_dir / LOG_FILE).open("a")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cluster.startup.head_supervisor", str(state_dir)],
        env=dict(head_env),
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        # It must see and act on a loss while the engines hold every core.
        preexec_fn=_raise_priority,
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
