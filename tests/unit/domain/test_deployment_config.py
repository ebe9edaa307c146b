"""A deployment config is refused before anything is deployed, with the field in the message."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from domain.app_name import AppName
from domain.deployment_config import (
    LayoutConfig,
    ModelDeploymentConfig,
    validate_model_name,
)


def _config(**fields: Any) -> ModelDeploymentConfig:
    return ModelDeploymentConfig.model_validate({"name": "m", "source": "org/m", **fields})


def _refusal(**fields: Any) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        _config(**fields)
    return info.value


def test_defaults_are_one_gpu_one_replica() -> None:
    config = _config()
    assert str(config.layout) == "TP1xPP1xDP1"
    assert config.accelerator.kind == "gpu"
    assert config.replicas == 1
    assert config.aliases == ()


def test_app_and_deployment_names_follow_ray_serve_llm() -> None:
    app = AppName("llama", 1)
    assert app.app == "model-llama-g1"
    assert app.deployment == "model-llama-g1:llama"


def test_deployment_name_sanitises_dots_to_underscores() -> None:
    app = AppName("qwen2.5-7b.v1", 3)
    assert app.app == "model-qwen2.5-7b.v1-g3"
    assert app.deployment == "model-qwen2.5-7b.v1-g3:qwen2_5-7b_v1"


@pytest.mark.parametrize("name", ["llama", "x-g2", "qwen2.5-7b.v1", "a" * 64])
@pytest.mark.parametrize("generation", [1, 2, 10, 123])
def test_an_app_name_parses_back_to_its_model_and_generation(name: str, generation: int) -> None:
    app = AppName(name, generation)
    assert AppName.parse(app.app) == app


@pytest.mark.parametrize(
    "app", ["switchyard-gateway", "model-llama", "model-llama-g0", "model-llama-g", "model--g1"]
)
def test_other_apps_are_not_model_generations(app: str) -> None:
    assert AppName.parse(app) is None


def test_generations_start_at_one() -> None:
    with pytest.raises(ValueError, match="generation=0"):
        AppName("llama", 0)


@pytest.mark.parametrize(
    "name",
    ["", "-leading-dash", ".hidden", "has space", "org/model", "x" * 65, "caf\u00e9"],
)
def test_bad_model_names_are_refused_naming_the_field(name: str) -> None:
    error = _refusal(name=name)
    assert error.errors()[0]["loc"] == ("name",)
    assert f"name={name!r} is not allowed" in str(error)


@pytest.mark.parametrize("name", ["a", "A1", "x" * 64, "Kimi-K2.5_int4", "9lives"])
def test_good_model_names_are_accepted(name: str) -> None:
    assert _config(name=name).name == name
    assert validate_model_name(name) == name


def test_a_bad_alias_is_refused_naming_aliases() -> None:
    error = _refusal(aliases=["ok", "not ok"])
    assert error.errors()[0]["loc"] == ("aliases",)
    assert "aliases='not ok' is not allowed" in str(error)


def test_vllm_data_parallel_is_refused_pointing_at_replicas() -> None:
    # Changed on purpose (planner issue): dp is vLLM data parallel inside one engine group,
    # which the deployer does not run yet; independent copies are `replicas`.
    for layout in ({"tp": 2, "dp": 2, "ep": True}, {"dp": 3}):
        message = str(_refusal(layout=layout))
        assert "vLLM data parallel" in message and "set replicas=" in message


def test_decode_context_parallel_must_divide_tp() -> None:
    assert "must divide tp=2" in str(_refusal(layout={"tp": 2, "dcp": 4}))
    assert str(_config(layout={"tp": 8, "dcp": 8}).layout) == "TP8xPP1xDP1xDCP8"


def test_expert_parallel_with_one_data_parallel_rank_is_allowed() -> None:
    config = _config(layout={"tp": 8, "ep": True})
    assert str(config.layout) == "TP8xPP1xDP1+EP"


def test_expert_parallel_on_the_cpu_is_refused() -> None:
    error = _refusal(layout={"tp": 2, "ep": True}, accelerator={"kind": "cpu"})
    message = str(error)
    assert "layout.ep=true" in message
    assert "accelerator.kind='cpu'" in message


@pytest.mark.parametrize(
    "key",
    [
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "data_parallel_size",
        "enable_expert_parallel",
        "distributed_executor_backend",
    ],
)
def test_engine_extra_may_not_set_what_the_layout_owns(key: str) -> None:
    error = _refusal(engine={"extra": {key: 2, "max_num_seqs": 8}})
    assert error.errors()[0]["loc"] == ("engine", "extra")
    message = str(error)
    assert f"engine.extra sets ['{key}']" in message
    assert "layout.tp/pp/dp/ep" in message


def test_engine_extra_passes_other_engine_arguments() -> None:
    assert _config(engine={"extra": {"block_size": 32}}).engine.extra == {"block_size": 32}


@pytest.mark.parametrize(
    ("fields", "loc"),
    [
        ({"layout": {"tp": 0}}, ("layout", "tp")),
        ({"layout": {"pp": 65}}, ("layout", "pp")),
        ({"replicas": 0}, ("replicas",)),
        ({"engine": {"gpu_memory_utilization": 0.0}}, ("engine", "gpu_memory_utilization")),
        ({"engine": {"gpu_memory_utilization": 1.5}}, ("engine", "gpu_memory_utilization")),
        ({"engine": {"max_model_len": 8}}, ("engine", "max_model_len")),
        ({"engine": {"kv_cache_dtype": "int3"}}, ("engine", "kv_cache_dtype")),
        ({"accelerator": {"kind": "tpu"}}, ("accelerator", "kind")),
        ({"source": ""}, ("source",)),
        ({"layuot": {"tp": 2}}, ("layuot",)),
    ],
)
def test_out_of_range_or_unknown_fields_are_refused_by_location(
    fields: dict[str, Any], loc: tuple[str, ...]
) -> None:
    error = _refusal(**fields)
    assert [e["loc"] for e in error.errors()] == [loc]


def test_configs_are_frozen() -> None:
    config = _config()
    with pytest.raises(ValidationError):
        config.replicas = 2  # type: ignore[misc]


def test_layout_counts_accelerators_per_replica_as_tp_times_pp() -> None:
    layout = LayoutConfig(tp=4, pp=2, dp=3)
    assert layout.gpus_per_replica == 8
    assert str(layout) == "TP4xPP2xDP3"
