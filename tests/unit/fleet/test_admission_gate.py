"""Admission against the live cluster: config -> request, then the policy's decision."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.fleet.admission_gate import admission_request, decide
from cluster.miniature_generator import write_miniature
from domain.deployment_config import (
    AcceleratorConfig,
    EngineConfig,
    LayoutConfig,
    ModelDeploymentConfig,
)
from policies.admission import Objective
from policies.inventory import ClusterInventory, GpuProfile, NodeInventory
from policies.layout import Layout
from policies.memory import KvCacheDtype
from policies.reasons import ReasonCode
from policies.units import GIB

# A Ray node id (56 hex characters); the inventory names nodes by their first 12.
NODE_A = "a1b2c3d4e5f6" + "0" * 44

GPU = AcceleratorConfig(kind="gpu")
CPU = AcceleratorConfig(kind="cpu")


def _config(
    tp: int = 1,
    *,
    pp: int = 1,
    dp: int = 1,
    ep: bool = False,
    dcp: int = 1,
    accelerator: AcceleratorConfig = CPU,
    engine: EngineConfig | None = None,
) -> ModelDeploymentConfig:
    return ModelDeploymentConfig(
        name="mini",
        source="miniature:minimax-m2.5",
        layout=LayoutConfig(tp=tp, pp=pp, dp=dp, ep=ep, dcp=dcp),
        accelerator=accelerator,
        engine=engine or EngineConfig(),
    )


class TestAdmissionRequest:
    @pytest.mark.parametrize(
        ("dtype", "expected"),
        [
            ("auto", KvCacheDtype.AUTO),
            ("bfloat16", KvCacheDtype.AUTO),
            ("fp8", KvCacheDtype.FP8),
            ("fp8_e4m3", KvCacheDtype.FP8),
            ("fp8_e5m2", KvCacheDtype.FP8),
        ],
    )
    def test_kv_cache_dtype(self, dtype: str, expected: KvCacheDtype) -> None:
        config = _config(engine=EngineConfig.model_validate({"kv_cache_dtype": dtype}))
        assert admission_request(config).kv_cache_dtype is expected

    def test_layout_and_engine_fields(self) -> None:
        config = _config(
            tp=4,
            pp=2,
            ep=True,
            accelerator=GPU,
            engine=EngineConfig(max_model_len=4096, gpu_memory_utilization=0.85),
        )
        request = admission_request(config)
        assert request.layout == Layout(tp=4, pp=2, dp=1, ep=True)
        assert request.max_model_len == 4096
        assert request.gpu_memory_utilization == 0.85
        # Weights are staged in the head's cache volume, which every node names "cache".
        assert request.weights_cached_on == frozenset({"cache"})

    def test_decode_context_parallel_layout(self) -> None:
        assert admission_request(_config(tp=4, dcp=2)).layout == Layout(tp=4, dcp=2)

    def test_the_objective_reaches_the_policy(self) -> None:
        request = admission_request(_config(), any_layout=True, objective="latency")
        assert request.objective is Objective.LATENCY and request.layout is None

    def test_full_context_when_max_model_len_unset(self) -> None:
        assert admission_request(_config()).max_model_len is None


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_miniature("minimax-m2.5", tmp_path_factory.mktemp("miniature") / "m")


def _cpu_node(slots: int, free: int) -> ClusterInventory:
    node = NodeInventory(
        name=NODE_A[:12],
        gpu=GpuProfile.cpu_standin(4.0),
        gpus=slots,
        free_gpus=free,
        disk_free_bytes=100 * GIB,
        host_ram_bytes=64 * GIB,
        storage="cache",
    )
    return ClusterInventory(nodes=(node,))


class TestDecide:
    def test_tp1_is_admitted_on_a_free_node(self, model_dir: Path) -> None:
        decision = decide(model_dir, _config(tp=1), _cpu_node(slots=4, free=4))
        assert decision.admitted, decision.reasons
        assert decision.reasons == ()
        assert decision.recommended is not None
        assert decision.recommended.layout == Layout(tp=1)
        # Only the asked-for layout is judged.
        assert [c.layout for c in decision.candidates] == [Layout(tp=1)]

    def test_tp5_is_refused_for_indivisible_heads(self, model_dir: Path) -> None:
        decision = decide(model_dir, _config(tp=5), _cpu_node(slots=4, free=4))
        assert not decision.admitted
        assert decision.recommended is None
        codes = {r.code for r in decision.reasons}
        assert ReasonCode.HEADS_NOT_DIVISIBLE in codes
        assert ReasonCode.NO_VALID_LAYOUT in codes

    def test_tp4_is_refused_with_only_two_slots_free(self, model_dir: Path) -> None:
        decision = decide(model_dir, _config(tp=4), _cpu_node(slots=4, free=2))
        assert not decision.admitted
        codes = {r.code for r in decision.reasons}
        assert ReasonCode.NOT_ENOUGH_GPUS in codes
        assert ReasonCode.NO_FITTING_LAYOUT in codes

    def test_tp4_is_admitted_counting_what_the_outgoing_model_frees(self, model_dir: Path) -> None:
        inventory = _cpu_node(slots=4, free=2)
        # A swap counts the outgoing model's slots as free, keyed by the truncated node name.
        decision = decide(model_dir, _config(tp=4), inventory, freed={NODE_A[:12]: 2})
        assert decision.admitted, decision.reasons
        assert decision.recommended is not None
        assert decision.recommended.layout == Layout(tp=4)
        assert decision.recommended.nodes == (NODE_A[:12],)

    def test_freeing_too_little_still_refuses(self, model_dir: Path) -> None:
        inventory = _cpu_node(slots=4, free=2)
        decision = decide(model_dir, _config(tp=4), inventory, freed={NODE_A[:12]: 1})
        assert not decision.admitted

    def test_empty_freed_changes_nothing(self, model_dir: Path) -> None:
        inventory = _cpu_node(slots=4, free=2)
        assert not decide(model_dir, _config(tp=4), inventory, freed={}).admitted
