"""A real Switchyard stack run through its CLI, for tests that share one across a module."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tests.support.vllm_cpu import cpu_tier

# Re-exported for tests/faults, which import it from here; new code imports tests.support.waiting.

SWITCHYARD = str(Path(sys.executable).with_name("switchyard"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stack_env(state_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, **(extra or {})}
    env["SWITCHYARD_HOME"] = str(state_dir)
    env["HF_HUB_OFFLINE"] = "1"
    env.pop("RAY_ADDRESS", None)
    return env


def cli_at(
    state_dir: Path, *args: str, timeout_s: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`switchyard ARGS --state-dir DIR`, its output captured; `env` adds to the command's
    environment."""
    return subprocess.run(
        [SWITCHYARD, *args, "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=stack_env(state_dir, env),
        check=False,
    )


@dataclass
class RunningStack:
    state_dir: Path
    port: int
    ray_port: int
    dashboard_port: int
    api_key: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment of `up` (so of the Ray head it starts, and every process in it)."""
    log: list[str] = field(default_factory=list)

    @classmethod
    def on_free_ports(cls, state_dir: Path, *, api_key: str | None = None) -> RunningStack:
        """A stack whose endpoint, Ray and dashboard ports are free now (modules share the box)."""
        return cls(
            state_dir=state_dir,
            port=free_port(),
            ray_port=free_port(),
            dashboard_port=free_port(),
            api_key=api_key,
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def up(self, *extra: str, timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
        extra = cpu_tier(extra)
        command = [
            SWITCHYARD,
            "up",
            "--detach",
            "--port",
            str(self.port),
            "--ray-port",
            str(self.ray_port),
            "--dashboard-port",
            str(self.dashboard_port),
            "--state-dir",
            str(self.state_dir),
            *extra,
        ]
        if self.api_key:
            command += ["--api-key", self.api_key]
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=stack_env(self.state_dir, self.env),
            check=False,
        )
        self.log.append(result.stdout + result.stderr)
        return result

    def cli(
        self, *args: str, timeout_s: float = 900, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`switchyard ARGS --state-dir DIR` against this stack, its output captured; `env`
        adds to the command's environment (a keys file's `key_env` variables)."""
        return cli_at(self.state_dir, *args, timeout_s=timeout_s, env=env)

    def metrics_text(self) -> str:
        """What every node's Ray metrics agent exports now (what Prometheus scrapes)."""
        from urllib.request import urlopen

        from cluster.telemetry.metrics_targets import scrape_targets, service_discovery_file

        texts = []
        for target in scrape_targets(service_discovery_file(self.state_dir)):
            with urlopen(f"http://{target}/metrics", timeout=10) as response:
                texts.append(response.read().decode())
        return "\n".join(texts)

    def status(self) -> dict[str, object]:
        result = subprocess.run(
            # --window-s 0: no live tok/s sampling (12 s of scraping) unless a test wants it.
            # Over Ray: the manager's view as of now (the gateway's route serves the one it
            # published up to two seconds ago; tests/e2e/test_inventory_status.py tests it).
            [
                *(SWITCHYARD, "status", "--json", "--window-s", "0", "--via", "ray"),
                *("--state-dir", str(self.state_dir)),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=stack_env(self.state_dir),
            check=True,
        )
        status: dict[str, object] = json.loads(result.stdout)
        return status

    def default_model(self) -> str:
        """The model the `default` alias points at now (the suite's swaps move it)."""
        aliases = self.status()["aliases"]
        assert isinstance(aliases, dict)
        return str(aliases["default"])

    def down(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [SWITCHYARD, "down", "--state-dir", str(self.state_dir)],
            capture_output=True,
            text=True,
            timeout=300,
            env=stack_env(self.state_dir),
            check=False,
        )

    def session_dir(self) -> str | None:
        marker = self.state_dir / "local_head.json"
        if not marker.exists():
            return None
        session: str | None = json.loads(marker.read_text()).get("session_dir")
        return session

    def processes(self) -> list[psutil.Process]:
        """Every process of this stack's Ray session (head daemons and their children)."""
        from cluster.startup.ray_runtime import local_head_processes

        return local_head_processes(self.state_dir)

    def engine_process(self, model: str) -> psutil.Process:
        """The vLLM EngineCore process serving `model` in this stack."""
        for proc in self.processes():
            try:
                if proc.name() != "VLLM::EngineCore":
                    continue
                parent = proc.parent()
                if parent is not None and f"model-{model}" in " ".join(parent.cmdline()):
                    return proc
            except psutil.NoSuchProcess:
                continue
        raise LookupError(f"no EngineCore process for {model}")
