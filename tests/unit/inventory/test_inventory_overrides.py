"""The `inventory` section of the cluster config: validated overrides of probed node values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from cluster.inventory.nvml_reader import interconnect_from_pairs
from cluster.inventory.overrides import (
    InventoryConfig,
    NodeOverride,
    apply_overrides,
    load_inventory_config,
    read_inventory_file,
    unmatched,
)
from cluster.inventory.records import (
    DRIVER_RESERVE_FRACTION,
    GpuDevice,
    GpuFacts,
    GpuFactSource,
    NodeProbe,
)
from domain.exit_codes import UserInputError
from policies.inventory import Interconnect
from switchyard.stack_config import StackConfig

GIB = 2**30


def gpu_probe(
    *,
    model: str = "NVIDIA H200",
    count: int = 8,
    memory_mib: int = 143_771,
    interconnect: Interconnect | None = Interconnect.NVLINK,
    node_id: str = "a1b2c3d4e5f6a7b8c9d0",
    node_ip: str = "10.0.0.5",
    hostname: str = "gpu-box-1",
    labels: tuple[tuple[str, str], ...] = (("rack", "r1"),),
) -> NodeProbe:
    return NodeProbe(
        node_id=node_id,
        node_ip=node_ip,
        hostname=hostname,
        gpus=GpuFacts(
            devices=tuple(GpuDevice(i, model, memory_mib * 2**20) for i in range(count)),
            interconnect=interconnect,
            source=GpuFactSource.NVML,
        ),
        standin_slots=0,
        cache_dir="/cache",
        disk_free_bytes=1_200 * GIB,
        host_ram_bytes=2_048 * GIB,
        labels=labels,
    )


def cpu_probe(slots: int = 4, node_ip: str = "127.0.0.1") -> NodeProbe:
    return NodeProbe(
        node_id="ffff0000ffff0000ffff",
        node_ip=node_ip,
        hostname="cpu-box",
        gpus=GpuFacts(devices=(), interconnect=None, source=GpuFactSource.DECLARED),
        standin_slots=slots,
        cache_dir="/cache",
        disk_free_bytes=50 * GIB,
        host_ram_bytes=24 * GIB,
    )


def test_without_overrides_the_probe_is_taken_as_it_is() -> None:
    facts = apply_overrides(gpu_probe(), (), standin_memory_gib=4.0)
    assert (facts.accelerator, facts.gpu_model, facts.gpu_count) == ("gpu", "NVIDIA H200", 8)
    # CUDA could not be asked here: NVML's total less the driver's estimated reserve.
    assert facts.gpu_memory_bytes == int(143_771 * 2**20 * (1 - DRIVER_RESERVE_FRACTION))
    assert facts.interconnect is Interconnect.NVLINK
    assert facts.overridden == ()
    assert facts.name == "a1b2c3d4e5f6"


def test_a_cpu_node_shows_its_declared_standin_slots() -> None:
    facts = apply_overrides(cpu_probe(slots=3), (), standin_memory_gib=4.0)
    assert (facts.accelerator, facts.gpu_model, facts.gpu_count) == ("standin", "cpu-standin", 3)
    assert facts.gpu_memory_bytes == 4 * GIB
    assert facts.interconnect is Interconnect.HOST_MEMORY
    assert facts.source is GpuFactSource.DECLARED


@pytest.mark.parametrize(
    "selector",
    [
        {"node_ip": "10.0.0.5"},
        {"node_name": "gpu-box-1"},
        {"node_name": "a1b2c3d4"},
        {"node_name": "a1b2c3d4e5f6a7b8c9d0"},
        {"label": "rack=r1"},
    ],
)
def test_a_node_is_named_by_ip_name_id_prefix_or_label(selector: dict[str, str]) -> None:
    override = NodeOverride.model_validate({**selector, "disk_free_gib": 100})
    facts = apply_overrides(gpu_probe(), (override,), standin_memory_gib=4.0)
    assert facts.disk_free_bytes == 100 * GIB
    assert facts.overridden == ("disk_free_bytes",)


@pytest.mark.parametrize(
    "selector",
    [{"node_ip": "10.0.0.6"}, {"node_name": "a1b2"}, {"label": "rack=r2"}, {"label": "rack2=r1"}],
)
def test_an_override_for_another_node_changes_nothing(selector: dict[str, str]) -> None:
    override = NodeOverride.model_validate({**selector, "gpu_count": 1})
    probe = gpu_probe()
    assert apply_overrides(probe, (override,), standin_memory_gib=4.0).gpu_count == 8
    assert unmatched((override,), [probe]) == [override.selector]


def test_every_probed_value_can_be_overridden_and_is_marked() -> None:
    override = NodeOverride(
        node_ip="10.0.0.5",
        gpu_model="rtx-pro-6000",
        gpu_memory_gib=90,
        gpu_count=4,
        interconnect=Interconnect.PCIE,
        disk_free_gib=500,
        host_ram_gib=512,
    )
    facts = apply_overrides(gpu_probe(), (override,), standin_memory_gib=4.0)
    assert facts.gpu_model == "rtx-pro-6000-blackwell"
    assert facts.gpu_memory_bytes == 90 * GIB
    assert facts.gpu_count == 4
    assert facts.interconnect is Interconnect.PCIE
    assert facts.disk_free_bytes == 500 * GIB
    assert facts.host_ram_bytes == 512 * GIB
    assert set(facts.overridden) == {
        "gpu_model",
        "gpu_memory_bytes",
        "gpu_count",
        "interconnect",
        "disk_free_bytes",
        "host_ram_bytes",
    }


def test_a_corrected_model_brings_its_memory_unless_memory_is_given() -> None:
    override = NodeOverride(node_ip="10.0.0.5", gpu_model="h100")
    facts = apply_overrides(gpu_probe(), (override,), standin_memory_gib=4.0)
    assert facts.gpu_memory_bytes == 79 * GIB


def test_later_overrides_win_and_earlier_fields_stay() -> None:
    first = NodeOverride(label="rack=r1", disk_free_gib=100, host_ram_gib=64)
    second = NodeOverride(node_ip="10.0.0.5", disk_free_gib=200)
    facts = apply_overrides(gpu_probe(), (first, second), standin_memory_gib=4.0)
    assert facts.disk_free_bytes == 200 * GIB
    assert facts.host_ram_bytes == 64 * GIB


def test_standin_slots_of_a_cpu_node_can_be_overridden() -> None:
    override = NodeOverride(node_ip="127.0.0.1", gpu_count=2, gpu_memory_gib=8)
    facts = apply_overrides(cpu_probe(slots=4), (override,), standin_memory_gib=4.0)
    assert (facts.accelerator, facts.gpu_count, facts.gpu_memory_bytes) == ("standin", 2, 8 * GIB)


def test_zero_gpus_takes_a_node_out() -> None:
    override = NodeOverride(node_ip="10.0.0.5", gpu_count=0)
    assert apply_overrides(gpu_probe(), (override,), standin_memory_gib=4.0).accelerator == "none"


@pytest.mark.parametrize(
    ("data", "field", "value", "allowed"),
    [
        (
            {"overrides": [{"node_ip": "10.0.0.5", "gpu_model": "h300"}]},
            "inventory.overrides.0.gpu_model",
            "'h300'",
            "allowed: a100-80g, b200, h100, h100-nvl, h100-pcie, h200, h200-nvl, l40s, "
            "rtx-pro-6000-blackwell, rtx-pro-6000-blackwell-max-q, cpu-standin",
        ),
        (
            {"overrides": [{"node_ip": "10.0.0.5", "interconnect": "infiniband"}]},
            "inventory.overrides.0.interconnect",
            "'infiniband'",
            "'pcie', 'nvlink' or 'host_memory'",
        ),
        (
            {"overrides": [{"node_ip": "10.0.0.5", "gpu_memory_gib": -1}]},
            "inventory.overrides.0.gpu_memory_gib",
            "-1",
            "greater than 0",
        ),
        (
            {"overrides": [{"node_ip": "10.0.0.5", "gpu_count": 1.5}]},
            "inventory.overrides.0.gpu_count",
            "1.5",
            "valid integer",
        ),
        (
            {"overrides": [{"node_ip": "10.0.0.5", "disk_free": 10}]},
            "inventory.overrides.0.disk_free",
            "10",
            "Extra inputs are not permitted",
        ),
        (
            {"overrides": [{"node_ip": "10.0.0.5", "node_name": "box", "gpu_count": 1}]},
            "inventory.overrides.0",
            "",
            "exactly one of node_ip, node_name, label",
        ),
        (
            {"overrides": [{"label": "rack", "gpu_count": 1}]},
            "inventory.overrides.0.label",
            "'rack'",
            "should match pattern",
        ),
        ({"probe_timeout_s": 0}, "inventory.probe_timeout_s", "0", "greater than 0"),
    ],
)
def test_invalid_values_name_field_value_and_what_is_allowed(
    data: dict[str, Any], field: str, value: str, allowed: str
) -> None:
    with pytest.raises(UserInputError) as caught:
        load_inventory_config(data)
    message = str(caught.value)
    assert message.startswith(field + ":")
    assert value in message
    assert allowed in message


def test_the_stack_and_manager_configs_carry_the_section() -> None:
    from cluster.fleet.manager_settings import ManagerSettings

    section = {"overrides": [{"node_ip": "10.0.0.5", "interconnect": "pcie"}]}
    stack = StackConfig.model_validate({"inventory": section})
    assert stack.inventory.overrides[0].interconnect is Interconnect.PCIE
    settings = ManagerSettings.model_validate(
        {"state_dir": "/tmp/x", "inventory": stack.inventory.model_dump(mode="json")}
    )
    assert settings.inventory == stack.inventory
    with pytest.raises(ValidationError):
        StackConfig.model_validate({"inventory": {"nodes": []}})


def test_the_inventory_file_is_yaml_or_json(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text("overrides:\n  - node_name: gpu-box-1\n    gpu_model: H200\n")
    config = read_inventory_file(path)
    assert config == InventoryConfig(
        overrides=(NodeOverride(node_name="gpu-box-1", gpu_model="h200"),)
    )
    path.write_text("[1, 2]")
    with pytest.raises(UserInputError, match="must hold a mapping"):
        read_inventory_file(path)


def test_nvml_pairs_are_nvlink_only_when_every_pair_says_so() -> None:
    assert interconnect_from_pairs([True, True]) is Interconnect.NVLINK
    assert interconnect_from_pairs([True, False]) is Interconnect.PCIE
    assert interconnect_from_pairs([True, None]) is Interconnect.PCIE
    assert interconnect_from_pairs([None, None]) is None
    assert interconnect_from_pairs([]) is None
