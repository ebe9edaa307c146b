"""Each GPU counted once: admission plans with the GPUs Ray can place engines on, and the
memory CUDA gives the engine.

A raylet started with `--num-gpus` (or under a `CUDA_VISIBLE_DEVICES`) declares fewer GPUs
than NVML sees on the machine; two raylets of one machine that each count its GPUs declare
twice as many. Ray places the engines, so Ray's count is what admission plans with, and
`status` shows both counts with a warning where they differ.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from cluster.inventory.cuda_memory import normalised_bus_id
from cluster.inventory.overrides import apply_overrides, gpu_count_warnings
from cluster.inventory.records import GpuDevice, GpuFacts, GpuFactSource, NodeFacts, NodeProbe
from policies.units import MIB

pytestmark = pytest.mark.unit


def _probe(node_id: str, *, ray_gpus: int | None, cuda_mib: int | None = None) -> NodeProbe:
    cuda = None if cuda_mib is None else cuda_mib * MIB
    devices = tuple(
        GpuDevice(i, "NVIDIA H100 80GB HBM3", 81_559 * MIB, cuda_memory_bytes=cuda)
        for i in range(8)
    )
    return NodeProbe(
        node_id=node_id * 20,
        node_ip="127.0.0.1",
        hostname="gpu-box",
        gpus=GpuFacts(devices=devices, interconnect=None, source=GpuFactSource.NVML),
        standin_slots=0,
        cache_dir="/cache",
        disk_free_bytes=None,
        host_ram_bytes=None,
        ray_gpus=ray_gpus,
    )


def _facts(probe: NodeProbe) -> NodeFacts:
    return apply_overrides(probe, (), standin_memory_gib=4.0)


def test_admission_plans_with_rays_count_where_it_differs_from_nvmls() -> None:
    half = _facts(_probe("a", ray_gpus=4))
    assert (half.gpu_count, half.probed_gpus, half.ray_gpus) == (4, 8, 4)
    assert half.to_json()["gpu_count_ray"] == 4
    assert half.to_json()["gpu_count_nvml"] == 8
    (warning,) = gpu_count_warnings((half,))
    assert "Ray declares 4 GPUs and nvml sees 8; planned with Ray's 4" in warning


def test_a_control_plane_head_that_declares_no_gpu_hosts_no_engine() -> None:
    head = _facts(_probe("h", ray_gpus=0))
    assert head.gpu_count == 0 and head.accelerator == "none"
    assert head.to_json()["gpu_count_nvml"] == 8


def test_the_same_count_from_both_is_no_warning() -> None:
    node = _facts(_probe("a", ray_gpus=8))
    assert node.gpu_count == 8
    assert gpu_count_warnings((node,)) == []


def test_two_raylets_of_one_machine_that_each_counted_its_gpus_are_named() -> None:
    head, data = _facts(_probe("h", ray_gpus=8)), _facts(_probe("d", ray_gpus=8))
    (warning,) = gpu_count_warnings((head, data))
    assert warning.startswith("host gpu-box: its raylets (hhhhhhhhhhhh, dddddddddddd) declare 16")
    assert "start every raylet with --num-gpus" in warning
    stated = (_facts(_probe("h", ray_gpus=0)), data)
    assert [w for w in gpu_count_warnings(stated) if w.startswith("host")] == []


def test_memory_is_what_cuda_gives_the_engine_where_cuda_answers() -> None:
    node = _facts(_probe("a", ray_gpus=8, cuda_mib=81_090))
    assert node.gpu_memory_bytes == 81_090 * MIB
    estimated = _facts(_probe("a", ray_gpus=8))
    # Without CUDA: below NVML's total by the documented estimate, never above it.
    assert 81_000 * MIB < estimated.gpu_memory_bytes < 81_559 * MIB


def test_logical_gpus_ray_declares_on_a_machine_without_any_are_not_a_disagreement() -> None:
    declared = replace(
        _probe("a", ray_gpus=8),
        gpus=GpuFacts(devices=(), interconnect=None, source=GpuFactSource.NONE),
    )
    assert gpu_count_warnings((_facts(declared),)) == []


@pytest.mark.parametrize(
    ("nvml", "cuda"), [("00000000:18:00.0", "0000:18:00.0"), ("0000:9A:00.0", "0000:9a:00.0")]
)
def test_nvml_and_cuda_bus_ids_are_matched(nvml: str, cuda: str) -> None:
    assert normalised_bus_id(nvml) == cuda
