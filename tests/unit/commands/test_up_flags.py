"""`switchyard up` flags -> StackConfig; bad input is a one-line UserInputError."""

from __future__ import annotations

from pathlib import Path

import pytest

from domain.exit_codes import UserInputError
from switchyard.cli import build_parser
from switchyard.commands import up
from switchyard.stack_config import StackConfig


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SWITCHYARD_API_KEY", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("SWITCHYARD_HOME", str(tmp_path / "home"))
    # `--accelerator auto` asks nvidia-smi; these tests decide the answer.
    monkeypatch.setattr("cluster.inventory.gpu_presence.has_nvidia_gpu", lambda: False)


def _config(*flags: str) -> StackConfig:
    args = build_parser().parse_args(["up", *flags])
    config = up.build_config(args)
    assert isinstance(config, StackConfig)
    return config


def _refusal(*flags: str) -> str:
    with pytest.raises(UserInputError) as info:
        _config(*flags)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_no_flags_serve_the_kimi_miniature_as_default_on_loopback(tmp_path: Path) -> None:
    config = _config()
    (model,) = config.models
    assert (model.name, model.source, model.aliases) == (
        "mini-kimi-k2.5",
        "miniature:kimi-k2.5",
        ("default",),
    )
    assert config.host == "127.0.0.1"
    assert config.port == 8000
    assert config.address is None
    assert config.state_dir == tmp_path / "home"
    assert config.gateway.api_keys == ()


def test_auto_accelerator_follows_gpu_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _config().accelerator == "cpu"
    assert _config().models[0].accelerator.kind == "cpu"
    monkeypatch.setattr("cluster.inventory.gpu_presence.has_nvidia_gpu", lambda: True)
    assert _config().accelerator == "gpu"
    assert _config().models[0].accelerator.kind == "gpu"


def test_auto_accelerator_with_an_address_is_the_clusters_not_this_machines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # This machine has a GPU; the cluster at --address is decided once joined (Stack.up).
    monkeypatch.setattr("cluster.inventory.gpu_presence.has_nvidia_gpu", lambda: True)
    joined = _config("--address", "10.0.0.1:6379")
    assert joined.accelerator_from_cluster
    on_gpus = joined.with_accelerator("gpu")
    assert not on_gpus.accelerator_from_cluster
    assert on_gpus.models[0].accelerator.kind == "gpu"
    assert on_gpus.models[0].engine.enforce_eager is False
    on_cpus = joined.with_accelerator("cpu")
    assert (on_cpus.models[0].accelerator.kind, on_cpus.models[0].engine.enforce_eager) == (
        "cpu",
        True,
    )
    assert not _config(
        "--address", "10.0.0.1:6379", "--accelerator", "gpu"
    ).accelerator_from_cluster


def test_auto_accelerator_of_a_local_head_follows_its_declared_gpus() -> None:
    assert _config("--num-gpus", "8").accelerator == "gpu"  # logical GPUs, this box has none
    assert _config("--num-gpus", "0").accelerator == "cpu"


def test_an_explicit_accelerator_skips_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_probe() -> bool:
        raise AssertionError("nvidia-smi should not be asked")

    monkeypatch.setattr("cluster.inventory.gpu_presence.has_nvidia_gpu", no_probe)
    assert _config("--accelerator", "gpu").models[0].accelerator.kind == "gpu"


def test_names_default_from_sources_and_only_the_first_model_gets_default() -> None:
    config = _config("--model", "Qwen/Qwen3-8B@main", "--model", "miniature:glm")
    assert [(m.name, m.source, m.aliases) for m in config.models] == [
        ("qwen3-8b", "Qwen/Qwen3-8B@main", ("default",)),
        ("mini-glm", "miniature:glm", ()),
    ]


def test_names_and_aliases_match_models_by_position() -> None:
    config = _config("--model", "org/a", "--model", "org/b", "--name", "first", "--alias", "fast")
    assert [(m.name, m.aliases) for m in config.models] == [("first", ("fast",)), ("b", ())]
    config = _config("--model", "org/a", "--model", "org/b", "--alias", "x", "--alias", "y")
    assert [m.aliases for m in config.models] == [("x",), ("y",)]


def test_more_names_or_aliases_than_models_is_refused() -> None:
    message = _refusal("--model", "org/a", "--name", "x", "--name", "y")
    assert message.startswith("--name/--alias: got 2 names and 0 aliases for 1 --model")
    assert "--name/--alias" in _refusal("--alias", "x", "--alias", "y")


def test_tp_applies_to_every_model() -> None:
    config = _config("--model", "org/a", "--model", "org/b", "--tp", "2")
    assert [m.layout.tp for m in config.models] == [2, 2]


def test_a_bad_tp_is_refused_naming_the_field() -> None:
    message = _refusal("--tp", "0")
    assert message.startswith("models.0.layout.tp: ")
    assert "0 is not allowed" in message


def test_max_model_len_is_set_only_when_given() -> None:
    assert _config().models[0].engine.max_model_len is None
    assert _config("--max-model-len", "2048").models[0].engine.max_model_len == 2048


def test_a_zero_max_model_len_is_refused_not_ignored() -> None:
    assert _refusal("--max-model-len", "0").startswith("models.0.engine.max_model_len: ")


def test_a_bad_name_is_refused_naming_the_field() -> None:
    message = _refusal("--name", "has space")
    assert message.startswith("models.0.name: ")
    assert "'has space'" in message


def test_a_non_loopback_host_without_a_key_is_refused() -> None:
    message = _refusal("--host", "0.0.0.0")
    assert "host='0.0.0.0' exposes the endpoint beyond this machine" in message


def test_a_non_loopback_host_with_a_key_flag_is_accepted() -> None:
    config = _config("--host", "0.0.0.0", "--api-key", "k1", "--api-key", "k2")
    assert [k.get_secret_value() for k in config.gateway.api_keys] == ["k1", "k2"]
    assert config.endpoint == "http://127.0.0.1:8000"


def test_keys_also_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHYARD_API_KEY", " e1, e2 ,,")
    config = _config("--host", "0.0.0.0", "--api-key", "f1")
    assert [k.get_secret_value() for k in config.gateway.api_keys] == ["f1", "e1", "e2"]


def test_a_refusal_never_echoes_the_api_keys() -> None:
    message = _refusal("--model", "org/a", "--model", "org/a", "--api-key", "sk-very-secret-value")
    assert "names ['a'] appear more than once" in message
    assert "sk-very-secret-value" not in message


def test_duplicate_aliases_are_refused() -> None:
    message = _refusal("--model", "org/a", "--model", "org/b", "--alias", "x", "--alias", "x")
    assert "aliases: ['x']" in message


def test_ray_address_comes_from_the_flag_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert _config().address == "10.0.0.1:6379"
    assert _config("--address", "10.0.0.2:6379").address == "10.0.0.2:6379"


def test_port_and_state_dir_flags(tmp_path: Path) -> None:
    config = _config("--port", "9001", "--state-dir", str(tmp_path / "state"))
    assert config.port == 9001
    assert config.state_dir == tmp_path / "state"
    assert _refusal("--port", "70000").startswith("port: ")


def test_a_fleet_file_starts_no_model_of_its_own() -> None:
    assert _config("-f", "fleet.yaml").models == ()


@pytest.mark.parametrize(
    "flags",
    [
        ("--model", "miniature:llama"),
        ("--tp", "1"),
        ("--max-model-len", "512"),
        ("--alias", "default"),
    ],
)
def test_a_fleet_file_with_model_flags_is_refused(flags: tuple[str, ...]) -> None:
    message = _refusal("--file", "fleet.yaml", *flags)
    assert message.startswith(f"-f/--file: {flags[0]} cannot be given with a fleet file")


def test_a_local_head_declares_the_slots_and_cpus_asked_for() -> None:
    head = _config("--standin-slots", "32", "--num-cpus", "64").local_head
    assert (head.standin_slots, head.num_cpus) == (32, 64)
    default = _config().local_head
    assert (default.standin_slots, default.num_cpus) == (4, 8)
    # The machine's GPUs unless told; stated to Ray either way (ray_runtime.start_local_head).
    assert default.num_gpus is None
    assert _config("--num-gpus", "8").local_head.num_gpus == 8


def test_declared_capacity_is_refused_for_a_joined_cluster_and_out_of_range() -> None:
    joined = _refusal("--address", "10.0.0.1:6379", "--num-cpus", "16")
    assert joined.startswith("--num-cpus: a joined cluster's nodes declare their own")
    assert "local_head.standin_slots: 5000 is not allowed" in _refusal("--standin-slots", "5000")
    assert _refusal("--address", "10.0.0.1:6379", "--num-gpus", "8").startswith(
        "--num-gpus: a joined cluster's nodes declare their own"
    )


def test_the_stand_in_engines_times_are_set_as_json_and_checked_by_field() -> None:
    config = _config("--fake-engines", "--fake-engine-settings", '{"wake_s": 2, "sleep_s": 0.3}')
    assert config.fake_engines is not None
    assert (config.fake_engines.wake_s, config.fake_engines.sleep_s) == (2, 0.3)
    assert _config("--fake-engines").fake_engines == _config("--fake-engines").fake_engines
    assert "only meaningful with --fake-engines" in _refusal("--fake-engine-settings", "{}")
    assert "fake_engines.wake" in _refusal(
        "--fake-engines", "--fake-engine-settings", '{"wake": 2}'
    )
