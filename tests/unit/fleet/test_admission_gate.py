"""Admission against the live cluster: Ray resources -> inventory, config -> request, decide."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.admission_gate import admission_request, decide, inventory_from_resources
from policies.inventory import ClusterInventory, GpuProfile, Interconnect, gpu_profile
from policies.layout import Layout
from policies.memory import KvCacheDtype
from policies.reasons import ReasonCode
from policies.units import GIB
from serve_apps.deployment_config import (
    AcceleratorConfig,
    EngineConfig,
    LayoutConfig,
    ModelDeploymentConfig,
)
from switchyard.miniature import write_miniature

# Ray node ids are 56 hex characters; the inventory names nodes by their first 12.
NODE_A = "a1b2c3d4e5f6" + "0" * 44
NODE_B = "0f0e0d0c0b0a" + "1" * 44
NODE_C = "ffffeeeedddd" + "2" * 44

GPU = AcceleratorConfig(kind="gpu")
CPU = AcceleratorConfig(kind="cpu")


def _inventory(
    totals: dict[str, dict[str, float]],
    available: dict[str, dict[str, float]],
    accelerator: AcceleratorConfig,
    *,
    standin_memory_gib: float = 4.0,
    disk_free_bytes: int | None = None,
) -> ClusterInventory:
    return inventory_from_resources(
        totals,
        available,
        accelerator,
        standin_memory_gib=standin_memory_gib,
        disk_free_bytes=disk_free_bytes,
    )


class TestGpuInventory:
    def test_nodes_without_gpus_are_skipped(self) -> None:
        inventory = _inventory(
            {
                NODE_A: {"CPU": 64.0, "GPU": 8.0, "accelerator_type:H100": 1.0},
                NODE_B: {"CPU": 16.0, "memory": 64.0 * GIB},
                NODE_C: {"CPU": 16.0, "GPU": 0.0},
            },
            {NODE_A: {"GPU": 8.0}, NODE_B: {}, NODE_C: {}},
            GPU,
        )
        assert [n.name for n in inventory.nodes] == [NODE_A[:12]]

    @pytest.mark.parametrize(
        ("ray_kind", "profile_name"),
        [("H100", "h100"), ("H200", "h200"), ("A100-80G", "a100-80g"), ("L40S", "l40s")],
    )
    def test_accelerator_type_selects_the_profile(self, ray_kind: str, profile_name: str) -> None:
        inventory = _inventory(
            {NODE_A: {"GPU": 4.0, f"accelerator_type:{ray_kind}": 1.0}},
            {NODE_A: {"GPU": 4.0}},
            GPU,
        )
        (node,) = inventory.nodes
        assert node.gpu == gpu_profile(ray_kind)
        assert node.gpu.name == profile_name

    def test_missing_accelerator_type_uses_the_default_kind(self) -> None:
        totals = {NODE_A: {"GPU": 2.0}}
        available = {NODE_A: {"GPU": 2.0}}
        assert _inventory(totals, available, GPU).nodes[0].gpu == gpu_profile("h100")
        other = inventory_from_resources(
            totals,
            available,
            GPU,
            standin_memory_gib=4.0,
            disk_free_bytes=None,
            default_gpu_kind="h200",
        )
        assert other.nodes[0].gpu == gpu_profile("h200")

    def test_mixed_kinds_keep_their_own_profiles(self) -> None:
        inventory = _inventory(
            {
                NODE_A: {"GPU": 8.0, "accelerator_type:H200": 1.0},
                NODE_B: {"GPU": 4.0, "accelerator_type:L40S": 1.0},
            },
            {NODE_A: {"GPU": 8.0}, NODE_B: {"GPU": 4.0}},
            GPU,
        )
        by_name = {n.name: n for n in inventory.nodes}
        assert by_name[NODE_A[:12]].gpu == gpu_profile("h200")
        assert by_name[NODE_B[:12]].gpu == gpu_profile("l40s")

    def test_counts_and_free_counts(self) -> None:
        inventory = _inventory(
            {
                NODE_A: {"GPU": 8.0, "accelerator_type:H100": 1.0},
                NODE_B: {"GPU": 4.0, "accelerator_type:H100": 1.0},
            },
            {NODE_A: {"GPU": 3.0}, NODE_B: {}},
            GPU,
        )
        by_name = {n.name: n for n in inventory.nodes}
        assert (by_name[NODE_A[:12]].gpus, by_name[NODE_A[:12]].free_gpus) == (8, 3)
        # A node missing from (or without GPU in) `available` has nothing free.
        assert (by_name[NODE_B[:12]].gpus, by_name[NODE_B[:12]].free_gpus) == (4, 0)
        assert inventory.total_gpus == 12
        assert inventory.free_gpus == 3

    def test_node_missing_from_available_has_nothing_free(self) -> None:
        inventory = _inventory({NODE_A: {"GPU": 2.0, "accelerator_type:H100": 1.0}}, {}, GPU)
        assert inventory.nodes[0].free_gpus == 0

    def test_host_ram_disk_and_storage(self) -> None:
        inventory = _inventory(
            {
                NODE_A: {"GPU": 8.0, "accelerator_type:H100": 1.0, "memory": 512.0 * GIB},
                NODE_B: {"GPU": 8.0, "accelerator_type:H100": 1.0},
            },
            {NODE_A: {"GPU": 8.0}, NODE_B: {"GPU": 8.0}},
            GPU,
            disk_free_bytes=123 * GIB,
        )
        by_name = {n.name: n for n in inventory.nodes}
        assert by_name[NODE_A[:12]].host_ram_bytes == 512 * GIB
        assert by_name[NODE_B[:12]].host_ram_bytes is None
        for node in inventory.nodes:
            assert node.disk_free_bytes == 123 * GIB
            assert node.storage == "cache"

    def test_nodes_are_sorted_by_id_and_names_truncated(self) -> None:
        inventory = _inventory(
            {
                NODE_A: {"GPU": 1.0, "accelerator_type:H100": 1.0},
                NODE_B: {"GPU": 1.0, "accelerator_type:H100": 1.0},
            },
            {},
            GPU,
        )
        assert [n.name for n in inventory.nodes] == [NODE_B[:12], NODE_A[:12]]
        assert all(len(n.name) == 12 for n in inventory.nodes)


class TestCpuInventory:
    def test_standin_resource_counts_slots(self) -> None:
        inventory = _inventory(
            {
                NODE_A: {"CPU": 32.0, "accel_slot": 4.0, "memory": 64.0 * GIB},
                NODE_B: {"CPU": 32.0, "memory": 64.0 * GIB},
            },
            {NODE_A: {"CPU": 30.0, "accel_slot": 1.0}, NODE_B: {"CPU": 32.0}},
            CPU,
            standin_memory_gib=6.0,
        )
        (node,) = inventory.nodes
        assert node.name == NODE_A[:12]
        assert (node.gpus, node.free_gpus) == (4, 1)
        assert node.gpu == GpuProfile.cpu_standin(6.0)
        assert node.gpu.interconnect is Interconnect.HOST_MEMORY
        assert node.gpu.memory_bytes == 6 * GIB
        assert node.host_ram_bytes == 64 * GIB

    def test_gpu_resources_do_not_count_in_cpu_mode(self) -> None:
        with pytest.raises(ValueError):
            # No node declares the stand-in resource: an inventory needs at least one node.
            _inventory(
                {NODE_A: {"CPU": 32.0, "GPU": 8.0, "accelerator_type:H100": 1.0}},
                {NODE_A: {"GPU": 8.0}},
                CPU,
            )

    def test_custom_standin_resource_name(self) -> None:
        accelerator = AcceleratorConfig(kind="cpu", standin_resource="fake_gpu")
        inventory = _inventory(
            {NODE_A: {"CPU": 8.0, "fake_gpu": 2.0, "accel_slot": 8.0}},
            {NODE_A: {"fake_gpu": 2.0, "accel_slot": 8.0}},
            accelerator,
        )
        assert (inventory.nodes[0].gpus, inventory.nodes[0].free_gpus) == (2, 2)

    def test_no_standin_resource_falls_back_to_cpus(self) -> None:
        accelerator = AcceleratorConfig(kind="cpu", standin_resource=None)
        inventory = _inventory({NODE_A: {"CPU": 16.0}}, {NODE_A: {"CPU": 10.0}}, accelerator)
        assert (inventory.nodes[0].gpus, inventory.nodes[0].free_gpus) == (16, 10)


def _config(
    tp: int = 1,
    *,
    pp: int = 1,
    dp: int = 1,
    ep: bool = False,
    accelerator: AcceleratorConfig = CPU,
    engine: EngineConfig | None = None,
) -> ModelDeploymentConfig:
    return ModelDeploymentConfig(
        name="mini",
        source="miniature:minimax-m2.5",
        layout=LayoutConfig(tp=tp, pp=pp, dp=dp, ep=ep),
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

    def test_data_parallel_layout(self) -> None:
        assert admission_request(_config(tp=2, dp=3)).layout == Layout(tp=2, pp=1, dp=3)

    def test_full_context_when_max_model_len_unset(self) -> None:
        assert admission_request(_config()).max_model_len is None


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_miniature("minimax-m2.5", tmp_path_factory.mktemp("miniature") / "m")


def _cpu_node(slots: int, free: int) -> ClusterInventory:
    return _inventory(
        {NODE_A: {"CPU": 32.0, "accel_slot": float(slots), "memory": 64.0 * GIB}},
        {NODE_A: {"CPU": 32.0, "accel_slot": float(free)}},
        CPU,
        standin_memory_gib=4.0,
        disk_free_bytes=100 * GIB,
    )


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
