"""`switchyard up`: start (or join) a Ray cluster, the gateway and the initial models."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from domain.exit_codes import ExitCode, UserInputError
from domain.validation_message import dotted, validation_line


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "up",
        help="serve models behind one OpenAI endpoint (starts a local Ray head if needed)",
        description="Start the gateway and the initial models, print the endpoint, and stay in "
        "the foreground until Ctrl-C (or return at once with --detach). Without --model it "
        "serves the embedded Kimi-K2.5 miniature as 'mini-kimi-k2.5', alias 'default'.",
    )
    parser.add_argument(
        "--address", help="Ray cluster address (default: $RAY_ADDRESS, else start a local head)"
    )
    parser.add_argument(
        "--model",
        action="append",
        dest="models",
        metavar="SOURCE",
        help="hub id[@rev], local dir or miniature:NAME (repeatable)",
    )
    parser.add_argument(
        "--name",
        action="append",
        dest="names",
        metavar="NAME",
        help="served name of the matching --model (repeatable, by position)",
    )
    parser.add_argument(
        "--alias",
        action="append",
        dest="aliases",
        metavar="ALIAS",
        help="alias of the matching --model (default: 'default' for the first)",
    )
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--gateway-replicas",
        type=int,
        default=1,
        metavar="N",
        help="gateway replicas on the head, sharing the endpoint port: with 2 or more, a "
        "restarted replica never leaves the port without a listener (default 1)",
    )
    parser.add_argument(
        "--api-key",
        action="append",
        dest="api_keys",
        metavar="KEY",
        help="accepted bearer token (repeatable; also $SWITCHYARD_API_KEY, comma-separated)",
    )
    parser.add_argument(
        "--admin-key-env",
        default=None,
        metavar="NAME",
        help="the environment variable holding the operator key: it alone opens "
        "`GET /switchyard/v1/status` (the status document: inventory and every tenant's "
        "usage); without it that route is open on a keyless loopback endpoint only",
    )
    parser.add_argument(
        "--keys",
        type=Path,
        default=None,
        metavar="FILE",
        help="tenant keys (YAML `keys:` entries: name, key_env or key_sha256, models, "
        "requests_per_minute, tokens_per_minute; see docs/tenants.md) instead of --api-key; "
        "`switchyard keys reload` re-reads it",
    )
    parser.add_argument(
        "--tls-cert",
        type=Path,
        default=None,
        metavar="FILE",
        help="serve the endpoint over HTTPS with this certificate chain (PEM; with --tls-key)",
    )
    parser.add_argument(
        "--tls-key", type=Path, default=None, metavar="FILE", help="the certificate's key (PEM)"
    )
    parser.add_argument("--accelerator", choices=("auto", "gpu", "cpu"), default="auto")
    parser.add_argument(
        "--tp", type=int, default=None, help="tensor parallel size of every model (default 1)"
    )
    parser.add_argument(
        "-f",
        "--file",
        type=Path,
        default=None,
        metavar="FILE",
        help="start the fleet a fleet file describes (see docs/fleet-file.md) instead of "
        "--model; `apply -f` changes it later",
    )
    parser.add_argument("--max-model-len", type=int, default=None)
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--ray-port", type=int, default=6379, help="port of a local Ray head")
    parser.add_argument(
        "--standin-slots",
        type=int,
        default=None,
        metavar="N",
        help="CPU stand-in accelerator slots a local head declares (default 4): each CPU "
        "engine replica holds one per accelerator of its layout",
    )
    parser.add_argument(
        "--num-cpus",
        type=int,
        default=None,
        metavar="N",
        help="logical CPUs a local head declares (default 8): Serve's controller, proxy and "
        "gateway and every model replica hold one, whatever the machine has",
    )
    parser.add_argument(
        "--num-gpus",
        type=int,
        default=None,
        metavar="N",
        help="GPUs a local head declares to Ray (default: the GPUs NVML sees on this machine, "
        "as CUDA_VISIBLE_DEVICES limits them); with --gcs-store its data node declares them "
        "and the head 0. Logical GPUs on a machine without any serve --fake-engines",
    )
    parser.add_argument(
        "--gcs-store",
        default=None,
        metavar="STORE",
        help="make the local head fault-tolerant: its GCS keeps its tables in STORE (local: "
        "a redis-server started beside the head; redis://HOST:PORT; rocksdb:PATH), and a "
        "supervisor restarts the GCS when it dies (see docs/reliability.md)",
    )
    parser.add_argument(
        "--gcs-store-password-env",
        default=None,
        metavar="NAME",
        help="the environment variable holding the Redis password of --gcs-store (never the "
        "password itself on Switchyard's command line)",
    )
    parser.add_argument(
        "--dashboard-port", type=int, default=8265, help="Ray dashboard port of a local head"
    )
    parser.add_argument(
        "--inventory",
        type=Path,
        default=None,
        metavar="FILE",
        help="YAML/JSON overrides of probed node hardware (see docs/inventory.md)",
    )
    parser.add_argument(
        "--fake-engines",
        action="store_true",
        help="serve every model with a stand-in engine instead of vLLM (same endpoint, "
        "routing, swaps and metrics; starts in a second; answers with placeholder tokens): "
        "for trying the gateway and fleet operations, and for tests",
    )
    parser.add_argument(
        "--fake-engine-settings",
        type=_json_object,
        default=None,
        metavar="JSON",
        help="with --fake-engines: how the stand-in engine behaves, a JSON object of "
        "start_s, token_interval_s, max_model_len, sleep_s, wake_s, reload_s",
    )
    parser.add_argument("--detach", action="store_true", help="return once everything is up")
    parser.set_defaults(handler=run)


def _gcs_store(args: argparse.Namespace) -> dict[str, Any]:
    """`--gcs-store` checked here, before anything starts (the password variable too)."""
    from cluster.startup.fault_tolerant_head import store_password
    from domain.gcs_store import parse_gcs_store

    text = getattr(args, "gcs_store", None)
    password_env = getattr(args, "gcs_store_password_env", None)
    if text is None:
        if password_env is not None:
            raise UserInputError("--gcs-store-password-env: given without --gcs-store")
        return {}
    if args.address or os.environ.get("RAY_ADDRESS"):
        raise UserInputError(
            "--gcs-store: a joined cluster's head belongs to its operator; start that head "
            "with RAY_REDIS_ADDRESS (docs/reliability.md has a systemd unit)"
        )
    store = parse_gcs_store(text)
    store_password(password_env)
    return {"gcs_store": store.to_text(), "gcs_store_password_env": password_env}


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("a JSON object is needed, e.g. '{\"wake_s\": 2}'")
    return value


def _fake_engines(args: argparse.Namespace) -> dict[str, Any] | None:
    """`--fake-engines` with its `--fake-engine-settings` (refused without it)."""
    settings = getattr(args, "fake_engine_settings", None)
    if not getattr(args, "fake_engines", False):
        if settings is not None:
            raise UserInputError("--fake-engine-settings: only meaningful with --fake-engines")
        return None
    return dict(settings or {})


def _declared_capacity(args: argparse.Namespace) -> dict[str, Any]:
    """`--standin-slots` / `--num-cpus` / `--num-gpus`: what a local head declares it can
    hold."""
    given = {
        key: value
        for key, value in (
            ("standin_slots", getattr(args, "standin_slots", None)),
            ("num_cpus", getattr(args, "num_cpus", None)),
            ("num_gpus", getattr(args, "num_gpus", None)),
        )
        if value is not None
    }
    if given and (args.address or os.environ.get("RAY_ADDRESS")):
        flag = "--" + next(iter(given)).replace("_", "-")
        raise UserInputError(
            f"{flag}: a joined cluster's nodes declare their own resources (ray start "
            "--num-cpus / --resources); this sets a local head's only"
        )
    return given


def _api_keys(args: argparse.Namespace) -> list[str]:
    keys = list(args.api_keys or [])
    env = os.environ.get("SWITCHYARD_API_KEY", "")
    keys += [k.strip() for k in env.split(",") if k.strip()]
    return keys


def _tenants(args: argparse.Namespace, fleet: Any) -> dict[str, Any]:
    """The gateway's tenant table from `--keys` or the fleet file's `gateway.keys`, checked
    against `--api-key`/SWITCHYARD_API_KEY (one kind of key per stack)."""
    from dataclasses import asdict

    from domain.tenant_keys import read_keys_file
    from switchyard.fleet_file_apply import fleet_tenants

    keys_file = getattr(args, "keys", None)
    fleet_keys = fleet.gateway.keys if fleet is not None else None
    if keys_file is not None and fleet_keys is not None:
        raise UserInputError(
            "--keys: the fleet file has gateway.keys already; give the keys in one place"
        )
    if keys_file is None and fleet_keys is None:
        return {}
    flag = "--keys" if keys_file is not None else "gateway.keys"
    if args.api_keys or os.environ.get("SWITCHYARD_API_KEY", "").strip():
        raise UserInputError(
            f"{flag}: cannot be combined with --api-key or SWITCHYARD_API_KEY; list every "
            "key in the keys file (an entry with key_env: SWITCHYARD_API_KEY keeps that one)"
        )
    table = (
        read_keys_file(keys_file, os.environ)
        if keys_file is not None
        else fleet_tenants(fleet, args.file)
    )
    assert table is not None  # the file has gateway.keys, or --keys was given
    return asdict(table)


def _admin_key(args: argparse.Namespace) -> dict[str, str]:
    """The operator key's SHA-256 from `--admin-key-env NAME` (the key itself never reaches
    the gateway's settings or a command line)."""
    from domain.tenant_keys import key_digest

    name = getattr(args, "admin_key_env", None)
    if name is None:
        return {}
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise UserInputError(
            f"--admin-key-env: {name!r} is not an environment variable name "
            "(letters, digits and _, not starting with a digit)"
        )
    key = os.environ.get(name, "").strip()
    if not key:
        raise UserInputError(
            f"--admin-key-env: ${name} is unset or empty in this process; export the "
            "operator key there first"
        )
    if not re.fullmatch(r"[\x21-\x7e]+", key):
        raise UserInputError(
            f"--admin-key-env: ${name} has characters other than printable ASCII without "
            "spaces; an HTTP Bearer token can't carry it"
        )
    return {"admin_key_sha256": key_digest(key)}


def _tls(args: argparse.Namespace) -> dict[str, str]:
    """The certificate and key's PEM text, checked to load as a pair before anything starts."""
    import ssl

    cert, key = getattr(args, "tls_cert", None), getattr(args, "tls_key", None)
    if cert is None and key is None:
        return {}
    if cert is None or key is None:
        given, missing = ("--tls-cert", "--tls-key") if cert else ("--tls-key", "--tls-cert")
        raise UserInputError(f"{given}: needs {missing} too (the certificate and its key)")
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
        return {"tls_cert_pem": cert.read_text(), "tls_key_pem": key.read_text()}
    except (OSError, ssl.SSLError, UnicodeDecodeError) as exc:
        # Never the files' text: the key's file is a secret.
        raise UserInputError(
            f"--tls-cert/--tls-key: {cert} and {key} do not load as a PEM certificate chain "
            f"and its private key ({type(exc).__name__}: {getattr(exc, 'strerror', None) or exc})"
        ) from None


def build_config(args: argparse.Namespace, fleet: Any = None) -> Any:
    from pydantic import ValidationError

    from cluster.inventory.gpu_presence import has_nvidia_gpu
    from switchyard.stack_config import (
        DEFAULT_ALIAS,
        DEFAULT_MODEL_NAME,
        DEFAULT_MODEL_SOURCE,
        StackConfig,
        default_name_for,
        default_state_dir,
        eager_on,
    )

    fleet_file = getattr(args, "file", None)
    if fleet_file is not None:
        given = [
            flag
            for flag, value in (
                ("--model", args.models),
                ("--name", args.names),
                ("--alias", args.aliases),
                ("--tp", args.tp is not None),
                ("--max-model-len", args.max_model_len),
            )
            if value
        ]
        if given:
            raise UserInputError(
                f"-f/--file: {given[0]} cannot be given with a fleet file; the file says "
                "which models run and how"
            )
    sources: list[str] = [] if fleet_file else (args.models or [DEFAULT_MODEL_SOURCE])
    names: list[str] = args.names or []
    aliases: list[str] = args.aliases or []
    if len(names) > len(sources) or len(aliases) > len(sources):
        raise UserInputError(
            f"--name/--alias: got {len(names)} names and {len(aliases)} aliases for "
            f"{len(sources)} --model; give at most one of each per --model, in order"
        )
    accelerator = args.accelerator
    address = args.address or os.environ.get("RAY_ADDRESS") or None
    # `auto` asks the machines that will run the engines: with --address, the cluster's
    # nodes, once joined (Stack.up); a local head's, this machine (or --num-gpus).
    from_cluster = accelerator == "auto" and address is not None
    if from_cluster:
        accelerator = "cpu"  # until joined: Stack.up asks the cluster
    elif accelerator == "auto":
        num_gpus = getattr(args, "num_gpus", None)
        local = has_nvidia_gpu() if num_gpus is None else num_gpus > 0
        accelerator = "gpu" if local else "cpu"
    models = []
    for i, source in enumerate(sources):
        if i < len(names):
            name = names[i]
        elif source == DEFAULT_MODEL_SOURCE:
            name = DEFAULT_MODEL_NAME
        else:
            name = default_name_for(source)
        model_aliases = [aliases[i]] if i < len(aliases) else ([DEFAULT_ALIAS] if i == 0 else [])
        engine: dict[str, Any] = {"enforce_eager": eager_on(accelerator)}
        if args.max_model_len is not None:
            engine["max_model_len"] = args.max_model_len
        models.append(
            {
                "name": name,
                "source": source,
                "aliases": model_aliases,
                "layout": {"tp": 1 if args.tp is None else args.tp},
                "engine": engine,
                "accelerator": {"kind": accelerator},
            }
        )
    tenants = _tenants(args, fleet)
    inventory: dict[str, Any] = {}
    if getattr(args, "inventory", None) is not None:
        from cluster.inventory.overrides import read_inventory_file

        inventory = read_inventory_file(args.inventory).model_dump(mode="json")
    try:
        return StackConfig.model_validate(
            {
                "inventory": inventory,
                "address": address,
                "accelerator_from_cluster": from_cluster,
                "host": args.host,
                "port": args.port,
                "state_dir": args.state_dir or default_state_dir(),
                "accelerator": accelerator,
                "models": models,
                "gateway": {
                    "api_keys": _api_keys(args),
                    "replicas": getattr(args, "gateway_replicas", 1),
                    **({"tenants": tenants} if tenants else {}),
                    **_tls(args),
                    **_admin_key(args),
                },
                "local_head": {
                    "port": args.ray_port,
                    "dashboard_port": args.dashboard_port,
                    **_gcs_store(args),
                    **_declared_capacity(args),
                },
                "ray_auth_mode": os.environ.get("RAY_AUTH_MODE") or None,
                "keys_file": getattr(args, "keys", None),
                "tls_cert_file": getattr(args, "tls_cert", None),
                "admin_key_env": getattr(args, "admin_key_env", None),
                "fake_engines": _fake_engines(args),
            }
        )
    except ValidationError as exc:
        raise UserInputError(validation_line(exc, dotted(""))) from None


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from cluster.fleet.ports import DeployFailed
    from switchyard.stack import Stack

    fleet = None
    if args.file is not None:
        from switchyard.commands.diff import read_checked_fleet_file

        # Read and validated before anything starts: a bad file changes nothing.
        fleet = read_checked_fleet_file(args.file)
    config = build_config(args, fleet[0] if fleet is not None else None)
    if config.fake_engines is None:
        from serve_apps.engine.serve_llm_imports import pairing_problem

        # Before anything starts: a vLLM that Ray Serve LLM cannot import fails every
        # deploy, deep inside Ray, minutes later.
        problem = pairing_problem()
        if problem is not None:
            raise UserInputError(problem)
    console = Console(stderr=True)

    def say(line: str) -> None:
        console.print(f"[dim]switchyard[/dim] {line}")

    # Ctrl-C (or SIGTERM) at any point of the start stops what was started. The signal is
    # also remembered: a KeyboardInterrupt raised inside a Ray call can be lost there, so
    # every step of the start (each report) and its end check for it again.
    interrupted = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        interrupted.set()
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)

    def report(line: str) -> None:
        say(line)
        if interrupted.is_set():
            raise KeyboardInterrupt

    stack = Stack(config, report)
    try:
        info, _ = stack.up()
        if interrupted.is_set():
            raise KeyboardInterrupt
        if fleet is not None:
            from cluster.clients.manager_client import RayManagerClient
            from cluster.clients.registry_client import RayRegistryClient
            from switchyard.fleet_file_apply import apply_fleet

            desired, sha256 = fleet
            say(f"applying {args.file} ...")
            applied = apply_fleet(
                RayManagerClient.connect(info.address),
                lambda: RayRegistryClient.connect(info.address),
                args.file,
                desired,
                sha256,
                # The gateway started with the file's keys already (build_config).
                tenants=None,
                dry_run=False,
                as_json=False,
            )
            if applied != ExitCode.OK:
                say(
                    f"[red]{args.file} was not applied in full[/red]; the stack is up with "
                    "what was done: fix the file and run `switchyard apply -f` again"
                )
                return applied
    except DeployFailed as exc:
        say(f"[red]a model failed to start:[/red] {exc}")
        return ExitCode.REJECTED
    except UserInputError:
        # Refused once the cluster was known (its ingress nodes): what this `up` started
        # goes, so a refused `up` changes nothing.
        if stack.started_head:
            _stop(config.state_dir, lambda line: None)
        raise
    except Exception as exc:
        # A Ray call that failed because the cluster was stopped under it (`switchyard
        # down` in another terminal while this one starts) is said in one line; anything
        # else keeps its traceback.
        if not _stopped_elsewhere(exc, stack.address):
            raise
        say(
            f"[red]the Ray cluster at {stack.address} was stopped while `up` was starting"
            "[/red] (by `switchyard down` or `ray stop` elsewhere); nothing of it is left running"
        )
        return ExitCode.REJECTED
    except (KeyboardInterrupt, SystemExit):
        # SystemExit: once connected, Ray's own SIGTERM handler exits this way.
        say("interrupted: stopping what `up` started ...")
        _stop(config.state_dir, say)
        return 130
    out = Console()
    out.print(f"[bold green]Switchyard is serving[/bold green] on {info.endpoint}/v1")
    for model in config.models:
        out.print(f"  model {model.name} ({model.layout}) from {model.source}")
    for entry in fleet[0].models if fleet is not None else ():
        out.print(f"  model {entry.name} from {entry.source} ({args.file})")
    if info.dashboard_url:
        out.print(f"  Ray dashboard: {info.dashboard_url}")
    first = _first_alias(config, fleet[0] if fleet is not None else None)
    auth = ""
    if config.gateway.api_keys:
        auth = ' -H "Authorization: Bearer $SWITCHYARD_API_KEY"'
    elif config.gateway.has_keys:
        auth = ' -H "Authorization: Bearer $YOUR_KEY"'
    if config.gateway.tls:
        auth += f" --cacert {args.tls_cert}"
    out.print(
        f"  try: curl {info.endpoint}/v1/chat/completions -H 'Content-Type: application/json'{auth}"
        f' -d \'{{"model": "{first}", "messages": [{{"role": "user", "content": '
        '"Hello"}], "max_tokens": 32}\''
    )
    sys.stdout.flush()
    if args.detach:
        return ExitCode.OK
    return _stay_in_foreground(info.address, config.state_dir, say, out)


CLUSTER_GONE_WAIT_S = 15.0
"""How long a failed start waits to see whether the cluster is being stopped."""


def _stopped_elsewhere(error: Exception, address: str | None) -> bool:
    """Whether `error` is a Ray call's failure because the cluster at `address` (the one
    this `up` connected to) went away."""
    from cluster.startup.ray_runtime import gcs_gone_within

    exceptions = sys.modules.get("ray.exceptions")
    if address is None or exceptions is None or not isinstance(error, exceptions.RayError):
        return False
    return gcs_gone_within(address, CLUSTER_GONE_WAIT_S)


def _first_alias(config: Any, fleet: Any) -> str:
    """What the printed `curl` example names: the first model's first alias (or name)."""
    if fleet is not None and fleet.models:
        first = fleet.models[0]
        return str(first.aliases[0] if first.aliases else first.name)
    if config.models and config.models[0].aliases:
        return str(config.models[0].aliases[0])
    return "default"


def _stay_in_foreground(address: str, state_dir: Path, report: Any, out: Any) -> int:
    """Wait for Ctrl-C (then stop the stack), or for the cluster to go away (then exit 0).

    The wait holds no Ray connection: a driver whose cluster was stopped elsewhere (`switchyard
    down` in another terminal) would retry the vanished GCS for a minute, printing errors."""
    from cluster.startup.ray_runtime import disconnect, gcs_reachable

    disconnect()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    out.print("Press Ctrl-C to stop.")
    recovering = False
    while not stop.wait(1.0):
        if gcs_reachable(address):
            if recovering:
                report(f"the head's GCS at {address} is back")
            recovering = False
        elif _supervised(state_dir):
            # A fault-tolerant head: its supervisor is starting the GCS again.
            if not recovering:
                report(f"the head's GCS at {address} is down; its supervisor is restarting it")
            recovering = True
        else:
            report(f"the Ray cluster at {address} went away (stopped elsewhere); exiting")
            return ExitCode.OK
    report("shutting down ...")
    _stop(state_dir, report)
    return ExitCode.OK


def _supervised(state_dir: Path) -> bool:
    from cluster.startup.fault_tolerant_head import describe_head, read_head_record

    return bool(describe_head(read_head_record(state_dir)).get("supervisor_running"))


DISCONNECT_TIMEOUT_S = 10.0


def _stop(state_dir: Path, report: Any) -> None:
    """Stop the stack. This process leaves the cluster first: a Ray driver whose cluster
    is gone would wait out Ray's GCS timeout (a minute) at exit."""
    from cluster.startup.ray_runtime import disconnect
    from switchyard.stack import read_stack_info
    from switchyard.teardown import stack_down

    leaving = threading.Thread(target=disconnect, daemon=True)
    leaving.start()
    leaving.join(DISCONNECT_TIMEOUT_S)
    info = read_stack_info(state_dir)
    stack_down(state_dir, None, report, recorded_address=info.address if info else None)
    if leaving.is_alive():
        # Interrupted inside a Ray call, the driver could not leave; its cluster is gone
        # now, so skip Ray's exit hooks rather than wait on them.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
