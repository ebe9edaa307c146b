"""Every engine start records vLLM's logged capacity next to admission's prediction; the
next admission of the very same deployment uses the logged figure (`kv_source` observed).

The CPU lines are a real Kimi-K2.5 miniature replica's log; the GPU lines are vLLM's own
format strings (gpu_model_runner.py, gpu_worker.py, kv_cache_utils.py) with the figures of
the story's MiniMax-M2.5 TP4 log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.ray_adapters.engine_log_capacity import logged_capacity
from cluster.telemetry.gauge_sampler import kv_prediction_ratios
from domain.engine_capacity import CapacityFigures, ModelCapacity
from domain.fleet_file import FleetFile, FleetModelEntry
from domain.operation import OperationResult, Outcome
from domain.operation_request import AddRequest, RemoveRequest
from switchyard.fleet_file_report import plan_lines
from tests.support.fleet_configs import OLD
from tests.unit.fleet.conftest import Fleet

pytestmark = pytest.mark.unit

CPU_LOG = Path(__file__).with_name("logs") / "kimi_replica_cpu.out"
GPU_LINES = [
    "(Worker_TP0 pid=11) INFO 03-02 10:00:01 [gpu_model_runner.py:3100] Model loading took "
    "53.75 GiB memory and 70.1 seconds",
    "(Worker_TP0 pid=11) INFO 03-02 10:00:09 [gpu_model_runner.py:6475] Estimated CUDA graph "
    "memory: 1.92 GiB total",
    "(Worker_TP0 pid=11) INFO 03-02 10:00:09 [gpu_worker.py:760] Available KV cache memory: "
    "23.62 GiB",
    "(Worker_TP1 pid=12) INFO 03-02 10:00:09 [gpu_worker.py:760] Available KV cache memory: "
    "23.64 GiB",
    "(EngineCore pid=10) INFO 03-02 10:00:10 [kv_cache_utils.py:2327] GPU KV cache size: "
    "399,424 tokens, Maximum concurrency for 196,608 tokens per request: 2.03x",
    "(Worker_TP0 pid=11) INFO 03-02 10:00:30 [gpu_model_runner.py:6582] Graph capturing "
    "finished in 20 secs, took 1.05 GiB",
]


def test_a_gpu_engines_lines_give_weights_kv_and_its_cuda_graph_estimate() -> None:
    assert logged_capacity(GPU_LINES) == CapacityFigures(
        weights_gib=53.75, kv_cache_gib=23.62, kv_cache_tokens=399_424, cuda_graph_gib=1.92
    )


def test_a_cpu_engine_logs_the_space_it_was_given_and_its_tokens_but_no_weights() -> None:
    figures = logged_capacity(CPU_LOG.read_text().splitlines())
    assert figures == CapacityFigures(kv_cache_gib=1.0, kv_cache_tokens=310_688)


def test_a_log_without_vllm_lines_knows_nothing() -> None:
    assert logged_capacity(["Starting fake engine", "ready"]).empty


def _add(fleet: Fleet) -> OperationResult:
    return fleet.engine.run(AddRequest(config=OLD))


def test_an_add_records_the_prediction_beside_what_the_engine_logged(fleet: Fleet) -> None:
    fleet.cluster.serve.logged[OLD.name] = CapacityFigures(kv_cache_gib=1.0, kv_cache_tokens=4096)
    result = _add(fleet)
    assert result.outcome is Outcome.DONE, result.message
    capacity = fleet.engine.fleet().capacity[OLD.name]
    assert capacity.observed.kv_cache_tokens == 4096
    predicted = capacity.predicted
    assert predicted.kv_cache_tokens is not None and predicted.kv_cache_tokens > 0
    assert predicted.kv_cache_gib == pytest.approx(1.0)  # the CPU engine's given space
    assert capacity.key
    assert result.details.admission is not None
    assert result.details.admission.kv_source == "model"
    assert capacity.kv_prediction_ratio == pytest.approx(4096 / predicted.kv_cache_tokens)
    assert fleet.journal.load_snapshot() == fleet.engine.fleet(), "journaled with the fleet"


def test_the_same_deployment_is_judged_again_by_its_engines_logged_size(fleet: Fleet) -> None:
    fleet.cluster.serve.logged[OLD.name] = CapacityFigures(kv_cache_tokens=4096)
    assert _add(fleet).outcome is Outcome.DONE
    assert fleet.engine.run(RemoveRequest(name=OLD.name)).outcome is Outcome.DONE
    assert OLD.name not in fleet.engine.fleet().capacity
    again = _add(fleet)
    assert again.outcome is Outcome.DONE, again.message
    assert again.details.admission is not None
    assert again.details.admission.kv_source == "observed"
    assert fleet.engine.fleet().capacity[OLD.name].predicted.kv_cache_tokens == 4096


def test_the_gauge_holds_observed_over_predicted_for_served_models_only() -> None:
    known = {
        "kimi": ModelCapacity(
            predicted=CapacityFigures(kv_cache_tokens=400),
            observed=CapacityFigures(kv_cache_tokens=440),
        ),
        "fake": ModelCapacity(predicted=CapacityFigures(kv_cache_tokens=400)),
        "gone": ModelCapacity(
            predicted=CapacityFigures(kv_cache_tokens=1),
            observed=CapacityFigures(kv_cache_tokens=1),
        ),
    }
    assert kv_prediction_ratios(known, {"kimi", "fake"}) == {"kimi": pytest.approx(1.1)}


def test_diff_says_where_each_steps_kv_figure_comes_from(fleet: Fleet) -> None:
    fleet.cluster.serve.logged[OLD.name] = CapacityFigures(kv_cache_tokens=4096)
    assert _add(fleet).outcome is Outcome.DONE
    same = OLD.model_copy(update={"name": "mini-twin", "aliases": ()})
    shorter = OLD.engine.model_copy(update={"max_model_len": 256})
    other = same.model_copy(update={"name": "mini-other", "engine": shorter})
    desired = FleetFile(
        models=[
            FleetModelEntry.of_config(OLD),
            FleetModelEntry.of_config(same),
            FleetModelEntry.of_config(other),
        ]
    )
    plan = fleet.engine.plan(desired).to_json()
    capacity = {c["model"]: c["capacity"] for c in plan["changes"]}
    # The twin is the very same deployment under another name: its engines will hold what
    # OLD's logged. Another context length is another deployment: the model predicts it.
    assert capacity["mini-twin"] == {"kv_cache_tokens": 4096, "kv_source": "observed"}
    assert capacity["mini-other"]["kv_source"] == "model"
    lines = "\n".join(plan_lines(plan))
    assert "KV cache 4,096 tokens per engine (logged by an engine of this deployment)" in lines
    assert "(the memory model's prediction)" in lines


def test_a_sleep_mode_engine_is_a_deployment_of_its_own_for_the_capacity_it_logs() -> None:
    """`park_mode: sleep` sets the typed `engine.enable_sleep_mode`: an observed figure of
    the engine without sleep mode is not reused for it, nor the other way round."""
    from domain.deployment_config import ModelDeploymentConfig
    from domain.engine_capacity import capacity_key

    def key(**engine: object) -> str:
        config = ModelDeploymentConfig.model_validate(
            {"name": "m", "source": "miniature:llama", "engine": engine}
        )
        return capacity_key(
            config, config_json=b"{}", gpu_profile="h100", vllm_version="0.32.0", environment={}
        ).digest()

    assert key(enable_sleep_mode=True) != key()
    assert key(enable_sleep_mode=False) != key(enable_sleep_mode=True)
