"""Every invalid value given to a `switchyard` command is refused the same way: exit code 2
and one line on stderr that names the field, before anything touches a cluster, the Hub
or the disk.

Each case runs the real entry point in-process. What would start work (a stack, a fleet
operation, staging, a benchmark) is replaced by a tripwire, so a value that slips through
validation fails the test instead of starting a cluster.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from domain.exit_codes import ExitCode
from switchyard.cli import main


class ReachedWork(AssertionError):
    """Validation let a bad value through: the command went on to do real work."""


def _tripwire(*_: Any, **__: Any) -> Any:
    raise ReachedWork("the command got past validation with a bad value")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("SWITCHYARD_API_KEY", "RAY_ADDRESS", "RAY_AUTH_MODE", "SWITCHYARD_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SWITCHYARD_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("cluster.inventory.gpu_presence.has_nvidia_gpu", lambda: False)
    monkeypatch.setattr("switchyard.stack.Stack", _tripwire)
    monkeypatch.setattr("switchyard.operation_runner.resolve_address", _tripwire)
    monkeypatch.setattr("cluster.staging.manifest.fetch_manifest", _tripwire)
    monkeypatch.setattr("cluster.staging.stage.stage", _tripwire)
    monkeypatch.setattr("switchyard.bench.tokenizer_source.locate_tokenizer", _tripwire)


@pytest.fixture
def bad_configs(tmp_path: Path) -> Path:
    """config.json files `plan` reads: one that is not JSON, one that is not a model's."""
    (tmp_path / "not-json").mkdir()
    (tmp_path / "not-json" / "config.json").write_text("{not json")
    (tmp_path / "no-arch").mkdir()
    (tmp_path / "no-arch" / "config.json").write_text(json.dumps({"hidden_size": 8}))
    (tmp_path / "list").mkdir()
    (tmp_path / "list" / "config.json").write_text("[1, 2]")
    return tmp_path


@pytest.fixture
def bad_inventories(tmp_path: Path) -> Path:
    """`up --inventory` files: not YAML, not a mapping, an unknown field."""
    (tmp_path / "not-yaml.yaml").write_text("nodes: [\n")
    (tmp_path / "list.yaml").write_text("- 1\n")
    (tmp_path / "unknown.yaml").write_text("bogus: 1\n")
    return tmp_path


PLAN = [
    "plan",
    "cluster/miniature_generator/reference_configs/Kimi-K2.5.config.json",
    "--gpu",
    "h200",
]
ADD = ["add", "miniature:llama", "--name", "ok"]
SWAP = ["swap", "old", "miniature:llama", "--name", "ok"]

# (argv, text the one line must contain: the field as the user knows it)
CASES: list[tuple[list[str], str]] = [
    # up: flags and the StackConfig they build
    (["up", "--port", "0"], "port"),
    (["up", "--port", "70000"], "port"),
    (["up", "--gateway-replicas", "0"], "gateway.replicas"),
    (["up", "--gateway-replicas", "65"], "gateway.replicas"),
    (["up", "--port", "http"], "--port"),
    (["up", "--tp", "0"], "tp"),
    (["up", "--max-model-len", "8"], "max_model_len"),
    (["up", "--name", "bad name!"], "name"),
    (["up", "--alias", ""], "aliases"),
    (["up", "--alias=-x"], "aliases"),
    (["up", "--model", ""], "source"),
    (["up", "--host", "0.0.0.0"], "host"),
    (["up", "--host", "192.0.2.7"], "host"),
    (["up", "--ray-port", "80"], "port"),
    (["up", "--dashboard-port", "99999"], "dashboard_port"),
    (["up", "--accelerator", "tpu"], "--accelerator"),
    (["up", "--name", "a", "--name", "b"], "--name"),
    (["up", "--model", "miniature:llama", "--model", "miniature:llama"], "models"),
    (["up", "--model", "miniature:llama", "--name", "default"], "aliases"),
    # add / swap: the new model's deployment config
    (["add", "miniature:llama", "--name", "bad name!"], "name"),
    ([*ADD, "--tp", "0"], "layout.tp"),
    ([*ADD, "--pp", "-1"], "layout.pp"),
    ([*ADD, "--dp", "65"], "layout.dp"),
    ([*ADD, "--dp", "2", "--ep"], "layout"),
    ([*ADD, "--dp", "2"], "set replicas=2"),
    ([*ADD, "--tp", "2", "--dcp", "4"], "must divide tp=2"),
    ([*ADD, "--layout", "auto", "--tp", "2"], "--layout auto: admission chooses the layout"),
    ([*ADD, "--objective", "latency"], "--objective: only meaningful with --layout auto"),
    ([*ADD, "--layout", "fixed"], "--layout"),
    ([*ADD, "--max-model-len", "1"], "engine.max_model_len"),
    ([*ADD, "--park-mode", "hibernate"], "--park-mode"),
    ([*ADD, "--sleep-level", "2"], "--sleep-level: only meaningful with park_mode: sleep"),
    ([*ADD, "--park-mode", "sleep", "--sleep-level", "3"], "--sleep-level"),
    ([*ADD, "--residency", "sometimes"], "--residency"),
    ([*ADD, "--park-after-idle-s", "30"], "--park-after-idle-s"),
    ([*ADD, "--residency", "on_demand", "--min-resident-s", "-1"], "--min-resident-s"),
    ([*SWAP, "--residency", "on_demand", "--park-after-idle-s", "0"], "--park-after-idle-s"),
    ([*ADD, "--alias", "no spaces"], "aliases"),
    ([*ADD, "--tp", "two"], "--tp"),
    (["add", "miniature:llama"], "--name"),
    (["add", "", "--name", "ok"], "source"),
    ([*SWAP, "--tp", "0"], "layout.tp"),
    ([*SWAP, "--max-model-len", "0"], "engine.max_model_len"),
    (["swap", "old", "miniature:llama", "--name", "x y"], "name"),
    # alias / remove
    (["alias", "set", "bad alias", "ok"], "alias"),
    (["alias", "unset", "a", "b"], "action"),
    (["remove", "bad name!"], "name"),
    (["park", "bad name!"], "name"),
    (["wake", "bad name!"], "name"),
    # stage
    (["stage", ""], "source"),
    (["stage", "miniature:llama", "--reserve-gib", "-1"], "reserve_gib"),
    (["stage", "miniature:llama", "--reserve-gib", "lots"], "--reserve-gib"),
    # plan: flags and the config.json it reads
    ([*PLAN, "--gpus-per-node", "0"], "--gpus-per-node"),
    ([*PLAN, "--gpus-per-node", "8", "--nodes", "0"], "--nodes"),
    (
        [*PLAN, "--gpus-per-node", "8", "--gpu-memory-utilization", "1.5"],
        "--gpu-memory-utilization",
    ),
    ([*PLAN, "--gpus-per-node", "8", "--disk-free-gib", "-1"], "--disk-free-gib"),
    ([*PLAN, "--gpus-per-node", "8", "--weights-gib", "0"], "--weights-gib"),
    ([*PLAN, "--gpus-per-node", "8", "--max-model-len", "0"], "--max-model-len"),
    ([*PLAN, "--gpus-per-node", "8", "--kv-cache-dtype", "int4"], "--kv-cache-dtype"),
    (["plan", PLAN[1], "--gpu", "tpu-v9", "--gpus-per-node", "8"], "--gpu"),
    (["plan", "/no/such/config.json", "--gpu", "h200", "--gpus-per-node", "8"], "MODEL"),
    # miniature
    (["miniature", "gpt-9", "/tmp/out"], "name"),
    # bench
    (["bench", "--concurrency", "1,x"], "--concurrency"),
    (["bench", "--concurrency", "0"], "concurrency"),
    (["bench", "--num-prompts", "0"], "--num-prompts"),
    (["bench", "--input-len", "0"], "--input-len"),
    (["bench", "--output-len", "-3"], "--output-len"),
    (["bench", "--request-rate", "-1"], "--request-rate"),
    (["bench", "--during-swap", "old", "miniature:llama"], "--name"),
]

# (config.json's folder, what the line names: the file, or the field that is wrong in it)
CONFIG_FILE_CASES = [
    ("not-json", "config.json"),
    ("no-arch", "architectures"),
    ("list", "config.json"),
]


def _refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own refusals
        code = exit_.code  # type: ignore[assignment]
    out, err = capsys.readouterr()
    assert code == ExitCode.BAD_INPUT, f"exit {code}; stdout={out!r} stderr={err!r}"
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert out == ""
    return lines[0]


@pytest.mark.parametrize(("argv", "field"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_an_invalid_value_exits_2_with_one_line_naming_the_field(
    argv: list[str], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _refusal(argv, capsys)
    assert field in line, line


@pytest.mark.parametrize(("config", "named"), CONFIG_FILE_CASES)
def test_a_bad_model_config_file_exits_2_with_one_line_naming_it(
    config: str, named: str, bad_configs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = bad_configs / config / "config.json"
    line = _refusal(["plan", str(path), "--gpu", "h200", "--gpus-per-node", "8"], capsys)
    assert named in line, line


@pytest.mark.parametrize(
    ("name", "named"),
    [
        ("not-yaml", "--inventory"),
        ("list", "--inventory"),
        ("unknown", "bogus"),
        ("absent", "--inventory"),
    ],
)
def test_a_bad_inventory_file_exits_2_with_one_line_naming_it(
    name: str, named: str, bad_inventories: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _refusal(["up", "--inventory", str(bad_inventories / f"{name}.yaml")], capsys)
    assert named in line, line


def test_the_api_key_never_appears_in_a_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    line = _refusal(["up", "--api-key", "sk-very-secret", "--port", "0"], capsys)
    assert "sk-very-secret" not in line


@pytest.mark.parametrize("key", ["", "two words", "cl\u00e9-secr\u00e8te", "tab\tkey"])
def test_an_api_key_no_bearer_header_can_carry_is_refused_without_echoing_it(
    key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _refusal(["up", "--api-key", "sk-fine", "--api-key", key], capsys)
    assert "api_keys" in line and "API key #2" in line, line
    if key:
        assert key not in line


# ---------------------------------------------------------------- tenant keys


def _keys_file(tmp_path: Path, text: str = "keys:\n  - {name: alice, key_env: ALICE_KEY}\n") -> str:
    path = tmp_path / "keys.yaml"
    path.write_text(text)
    return str(path)


def test_keys_with_an_api_key_flag_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALICE_KEY", "sk-alice")
    line = _refusal(["up", "--keys", _keys_file(tmp_path), "--api-key", "sk-other"], capsys)
    assert "--keys" in line and "--api-key" in line and "sk-other" not in line


def test_keys_with_switchyard_api_key_set_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALICE_KEY", "sk-alice")
    monkeypatch.setenv("SWITCHYARD_API_KEY", "sk-env")
    line = _refusal(["up", "--keys", _keys_file(tmp_path)], capsys)
    assert "SWITCHYARD_API_KEY" in line and "sk-env" not in line


def test_a_key_env_that_is_unset_exits_2_naming_the_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _refusal(["up", "--keys", _keys_file(tmp_path)], capsys)
    assert "(alice).key_env" in line and "ALICE_KEY" in line


def test_a_fleet_files_gateway_keys_with_keys_flag_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALICE_KEY", "sk-alice")
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("models: []\ngateway:\n  keys:\n    - {name: bob, key_env: ALICE_KEY}\n")
    line = _refusal(["up", "-f", str(fleet), "--keys", _keys_file(tmp_path)], capsys)
    assert "gateway.keys" in line


def test_a_fleet_files_gateway_keys_with_an_unset_key_env_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("models: []\ngateway:\n  keys:\n    - {name: bob, key_env: BOB_UNSET}\n")
    line = _refusal(["up", "-f", str(fleet)], capsys)
    assert "(bob).key_env" in line


def test_keys_reload_of_a_bad_file_exits_2_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _refusal(["keys", "reload", _keys_file(tmp_path, "keys: [{name: a}]\n")], capsys)
    assert "key_env and key_sha256" in line


def test_a_valid_keys_file_reaches_the_stack_with_digests_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from switchyard.cli import build_parser
    from switchyard.commands import up

    monkeypatch.setenv("ALICE_KEY", "sk-alice")
    args = build_parser().parse_args(["up", "--keys", _keys_file(tmp_path)])
    config = up.build_config(args)
    (alice,) = config.gateway.tenants.tenants
    assert alice.name == "alice" and len(alice.key_sha256) == 64
    assert "sk-alice" not in config.model_dump_json()
    assert config.keys_file is not None


# ---------------------------------------------------------------- TLS


def test_a_tls_certificate_without_its_key_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    line = _refusal(["up", "--tls-cert", str(cert)], capsys)
    assert "--tls-cert: needs --tls-key" in line


def test_files_that_are_not_a_certificate_and_key_exit_2_without_their_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_text("not a certificate")
    key.write_text("PRIVATE-KEY-TEXT")
    line = _refusal(["up", "--tls-cert", str(cert), "--tls-key", str(key)], capsys)
    assert "do not load as a PEM certificate chain" in line and "PRIVATE-KEY-TEXT" not in line


def test_a_tls_pair_makes_the_endpoint_https(tmp_path: Path) -> None:
    from switchyard.cli import build_parser
    from switchyard.commands import up
    from tests.support.tls_cert import self_signed

    cert, key = self_signed(tmp_path)
    args = build_parser().parse_args(["up", "--tls-cert", str(cert), "--tls-key", str(key)])
    config = up.build_config(args)
    assert config.endpoint.startswith("https://127.0.0.1:")
    assert key.read_text() not in repr(config)


def test_up_refuses_a_vllm_ray_serve_llm_cannot_import_before_anything_starts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    moved = (
        "the installed vLLM 0.33.0 lacks vllm.entrypoints.launchers.cli_args.FrontendArgs, "
        "which Ray 2.60.0's Serve LLM imports (...): install the vLLM line pyproject.toml pins"
    )
    monkeypatch.setattr("serve_apps.engine.serve_llm_imports.pairing_problem", lambda: moved)
    line = _refusal(["up"], capsys)
    assert line == f"switchyard up: error: {moved}"
    # Stand-in engines need no vLLM: the same install serves them.
    with pytest.raises(ReachedWork):
        main(["up", "--fake-engines"])
