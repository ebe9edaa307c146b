"""Secure defaults on a real stack (`switchyard up` with an API key, Ray token auth on):
every socket our processes listen on is bound to loopback, and the API key and the Ray
token appear in no log, no metrics endpoint, no `status` output and no process command
line.

On the suite's real stack (tests/support/shared_stacks.py), which it only reads. The
listener table is printed (`FIGURE ...` lines) for RELIABILITY.md: Ray opens many ports
and this is where each one binds.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil
import pytest

from cluster.startup.fault_tolerant_head import LOCAL_REDIS_DIR
from tests.support import shared_stacks
from tests.support.running_stack import SWITCHYARD, RunningStack, stack_env

API_KEY = shared_stacks.API_KEY


@pytest.fixture(scope="module")
def stack(real_stack: RunningStack) -> RunningStack:
    return real_stack


def _ray_token() -> str:
    token = (Path.home() / ".ray" / "auth_token").read_text().strip()
    assert len(token) >= 16
    return token


def _listeners(stack: RunningStack) -> list[tuple[str, str, int]]:
    """(process, bound address, port) for every listening TCP socket of the stack."""
    found: set[tuple[str, str, int]] = set()
    for proc in stack.processes():
        try:
            name = _short_name(proc)
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    found.add((name, conn.laddr.ip, conn.laddr.port))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return sorted(found)


def _short_name(proc: psutil.Process) -> str:
    cmdline = proc.cmdline()
    first = cmdline[0] if cmdline else proc.name()
    if first.startswith("ray::"):
        return first.split()[0]
    script = next((arg for arg in cmdline[1:] if arg.endswith(".py")), None)
    return Path(script).name if script else Path(first).name


def _send_traffic(stack: RunningStack) -> None:
    auth = {"Authorization": f"Bearer {API_KEY}"}
    url = stack.base_url
    ok = httpx.post(
        f"{url}/completions",
        json={"model": "default", "prompt": "hi", "max_tokens": 4},
        headers=auth,
        timeout=120,
    )
    assert ok.status_code == 200, ok.text
    with httpx.stream(
        "POST",
        f"{url}/chat/completions",
        json={"model": "default", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        headers=auth,
        timeout=120,
    ) as stream:
        assert stream.status_code == 200
        stream.read()
    wrong = httpx.get(f"{url}/models", headers={"Authorization": "Bearer wrong"}, timeout=30)
    assert wrong.status_code == 401
    bad = httpx.post(f"{url}/completions", content=b"{", headers=auth, timeout=30)
    assert bad.status_code == 400


# ---------------------------------------------------------------- listeners


def _outside_address() -> str | None:
    """A non-loopback IPv4 address of this machine: how another machine would reach it."""
    for entries in psutil.net_if_addrs().values():
        for entry in entries:
            if (
                entry.family.name == "AF_INET"
                and not ipaddress.ip_address(entry.address).is_loopback
            ):
                return str(entry.address)
    return None


def _url(address: str, port: int, path: str) -> str:
    """A URL that reaches a listener bound to `address` (a wildcard is reached from outside)."""
    if address in ("0.0.0.0", "::"):
        address = _outside_address() or "127.0.0.1"
    host = f"[{address}]" if ":" in address else address
    return f"http://{host}:{port}{path}"


def test_the_endpoint_and_the_dashboard_listen_on_loopback_only(stack: RunningStack) -> None:
    listeners = _listeners(stack)
    for name, address, port in listeners:
        print(f"FIGURE secure_defaults listener {name} {address}:{port}")
    for port in (stack.port, stack.dashboard_port):
        bound = [address for _, address, p in listeners if p == port]
        assert bound, f"nothing listens on {port}"
        assert all(ipaddress.ip_address(a).is_loopback for a in bound), (port, bound)


def test_the_endpoint_and_the_dashboard_refuse_other_addresses(stack: RunningStack) -> None:
    outside = _outside_address()
    if outside is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    for port in (stack.port, stack.dashboard_port):
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://{outside}:{port}/", timeout=5)


def test_the_engine_replicas_direct_port_is_on_loopback_and_needs_the_replicas_token(
    stack: RunningStack,
) -> None:
    # The engine replica serves vLLM's app on a port of its own (the gateway's direct data
    # path); of the replica's listeners, that one alone speaks HTTP.
    answers: dict[tuple[str, int], int] = {}
    for name, address, port in _listeners(stack):
        if "ServeReplica:model-" not in name:
            continue
        try:
            response = httpx.get(_url(address, port, "/v1/models"), timeout=3)
        except httpx.HTTPError:
            continue
        answers[(address, port)] = response.status_code
    print(f"FIGURE secure_defaults engine_direct_port {answers}")
    # One HTTP port per engine replica (the real stack runs two models), each refusing a
    # caller without the replica's token, each on loopback.
    assert answers and set(answers.values()) == {401}, answers
    assert all(ipaddress.ip_address(address).is_loopback for address, _ in answers), answers


def _is_prometheus_exposition(response: httpx.Response) -> bool:
    kind = response.headers.get("content-type", "")
    return (
        # prometheus_client: text/plain; version=0.0.4 or 1.0.0, or OpenMetrics.
        (kind.startswith("text/plain") and "version=" in kind)
        or "openmetrics" in kind
        or response.text.startswith(("# HELP", "# TYPE"))
    )


def test_no_listener_beyond_loopback_serves_the_job_api_without_the_token(
    stack: RunningStack,
) -> None:
    # Ray's own servers (GCS, raylet, workers' gRPC, agents, metrics exporters) bind every
    # interface whatever the node address; Ray token auth is what guards them.
    exposed = [e for e in _listeners(stack) if not ipaddress.ip_address(e[1]).is_loopback]
    answers: dict[str, str] = {}
    for name, address, port in exposed:
        for path in ("/api/jobs/", "/api/job_agent/jobs/", "/api/version"):
            try:
                response = httpx.get(_url(address, port, path), timeout=3)
            except httpx.HTTPError:
                answers[f"{name} {address}:{port}{path}"] = "no HTTP"
                continue
            status = str(response.status_code)
            if response.status_code == 200 and _is_prometheus_exposition(response):
                # Ray's Prometheus exporters (prometheus_client) answer any path with metrics.
                status = "200 metrics"
            answers[f"{name} {address}:{port}{path}"] = status
    for where, status in sorted(answers.items()):
        print(f"FIGURE secure_defaults exposed {where} -> {status}")
    assert not [
        where
        for where, status in answers.items()
        if status.startswith("2") and status != "200 metrics"
    ]


def test_the_dashboard_and_the_cluster_refuse_callers_without_the_token(
    stack: RunningStack, tmp_path: Path
) -> None:
    dashboard = f"http://127.0.0.1:{stack.dashboard_port}/api/jobs/"
    assert httpx.get(dashboard, timeout=30).status_code == 401
    token = {"Authorization": f"Bearer {_ray_token()}"}
    assert httpx.get(dashboard, headers=token, timeout=30).status_code == 200

    def ray_status(**env: str) -> tuple[int, str]:
        command = [str(Path(SWITCHYARD).with_name("ray")), "status"]
        try:
            result = subprocess.run(
                [*command, f"--address=127.0.0.1:{stack.ray_port}"],
                capture_output=True,
                text=True,
                timeout=90,
                env={**stack_env(stack.state_dir), **env},
                check=False,
            )
        except subprocess.TimeoutExpired:
            return -1, "no answer in 90 s"  # kept out all the same
        return result.returncode, (result.stdout + result.stderr)[-500:]

    # With the token (what `switchyard` itself does), without it, with a wrong one.
    code, output = ray_status(RAY_AUTH_MODE="token")
    assert code == 0, output
    code, output = ray_status(RAY_AUTH_MODE="disabled", HOME=str(tmp_path))
    assert code != 0, output
    code, output = ray_status(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="not-the-token-" + "x" * 20)
    assert code != 0, output
    print(f"FIGURE secure_defaults ray status: token 0, no token / wrong token refused ({code})")


# ---------------------------------------------------------------- secrets


def test_the_key_and_token_appear_in_no_log_status_metrics_or_command_line(
    stack: RunningStack,
) -> None:
    token = _ray_token()
    secrets = {"api key": API_KEY.encode(), "ray token": token.encode()}
    _send_traffic(stack)
    leaks: list[str] = []

    def scan(where: str, data: bytes) -> None:
        leaks.extend(f"{label} in {where}" for label, secret in secrets.items() if secret in data)

    # `switchyard up`'s own output and `status` (JSON and text).
    scan("up output", "\n".join(stack.log).encode())
    scan("status --json", json.dumps(stack.status()).encode())
    text = subprocess.run(
        [SWITCHYARD, "status", "--state-dir", str(stack.state_dir)],
        capture_output=True,
        timeout=120,
        env=stack_env(stack.state_dir),
        check=True,
    )
    scan("status", text.stdout + text.stderr)

    # Every file of the Ray session (logs of every process, the dashboard's, Serve's).
    session = stack.session_dir()
    assert session is not None
    files = [p for p in Path(session).rglob("*") if p.is_file() and not p.is_symlink()]
    assert any(p.suffix in (".log", ".out", ".err") for p in files)
    for path in files:
        try:
            scan(str(path), path.read_bytes())
        except OSError:
            continue
    # Switchyard's own state (journal, fleet snapshot, stack info). The local GCS store
    # (`up --gcs-store local`) holds the cluster's tables, Serve's deployment arguments with
    # the gateway's keys among them, as the GCS's memory does: it must be owner-only, as
    # Ray's token file is, rather than free of them.
    store = stack.state_dir / LOCAL_REDIS_DIR
    for path in stack.state_dir.rglob("*"):
        if store in path.parents or path == store:
            assert path.stat().st_mode & 0o077 == 0, f"{path} is readable by others"
            continue
        if path.is_file():
            scan(str(path), path.read_bytes())

    # Every HTTP metrics endpoint our processes serve (Ray's per-process exporters, the
    # dashboard's) and the gateway's model list.
    def metrics(listener: tuple[str, str, int]) -> tuple[str, bytes] | None:
        _, address, port = listener
        try:
            response = httpx.get(_url(address, port, "/metrics"), timeout=3)
        except httpx.HTTPError:
            return None  # not HTTP (Ray's gRPC servers keep the connection silent)
        return (f"{address}:{port}/metrics", response.content) if response.is_success else None

    # Concurrently: each silent gRPC port costs the whole read timeout.
    with ThreadPoolExecutor(16) as pool:
        pages = [page for page in pool.map(metrics, _listeners(stack)) if page is not None]
    for where, content in pages:
        scan(where, content)
    scraped = len(pages)
    assert scraped >= 1, "no metrics endpoint answered"

    # Command lines are readable by every local user (`ps`).
    for proc in stack.processes():
        try:
            scan(f"command line of pid {proc.pid}", " ".join(proc.cmdline()).encode())
        except psutil.NoSuchProcess:
            continue

    print(
        f"FIGURE secure_defaults scanned {len(files)} session files, {scraped} metrics "
        f"endpoints, {len(stack.processes())} command lines; leaks {len(leaks)}"
    )
    assert leaks == []
