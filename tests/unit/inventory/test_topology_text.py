"""`nvidia-smi` text, the fallback when NVML cannot be loaded, parsed into typed records."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.inventory.records import GpuDevice
from cluster.inventory.topology_text import (
    TopologyParseError,
    parse_query_gpu,
    parse_topology,
)
from policies.inventory import Interconnect

TOPOLOGY = Path(__file__).parent / "topology"


def test_an_8_gpu_nvlink_box_is_nvlink_between_every_pair() -> None:
    topology = parse_topology((TOPOLOGY / "h200_nvlink_8gpu.txt").read_text())
    assert topology.gpus == 8
    assert topology.nvlinks(0, 7) == 18
    assert topology.nvlinks(3, 3) == 0  # the diagonal is "X"
    assert topology.all_pairs_nvlink
    assert topology.interconnect is Interconnect.NVLINK


def test_nic_rows_and_columns_and_affinity_columns_are_left_out() -> None:
    topology = parse_topology((TOPOLOGY / "h200_nvlink_8gpu.txt").read_text())
    assert all(len(row) == 8 for row in topology.links)
    assert topology.links[0][0] == "X"


def test_an_8_gpu_pcie_box_is_pcie() -> None:
    topology = parse_topology((TOPOLOGY / "rtx_pro_6000_pcie_8gpu.txt").read_text())
    assert topology.gpus == 8
    assert topology.links[0][1] == "PIX"
    assert topology.links[0][2] == "NODE"
    assert topology.links[0][4] == "SYS"
    assert not topology.all_pairs_nvlink
    assert topology.interconnect is Interconnect.PCIE


def test_space_separated_text_as_pasted_from_a_terminal_parses_the_same() -> None:
    text = (TOPOLOGY / "h200_nvlink_8gpu.txt").read_text().replace("\t", "    ")
    assert parse_topology(text).interconnect is Interconnect.NVLINK


def test_partial_nvlink_counts_as_pcie_because_a_ring_is_as_slow_as_its_slowest_hop() -> None:
    text = "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV4\tSYS\nGPU1\tNV4\t X \tSYS\nGPU2\tSYS\tSYS\t X \n"
    topology = parse_topology(text)
    assert topology.nvlinks(0, 1) == 4
    assert topology.interconnect is Interconnect.PCIE


def test_one_gpu_has_no_interconnect() -> None:
    assert parse_topology("\tGPU0\tCPU Affinity\nGPU0\t X \t0-15\n").interconnect is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("No devices were found\n", "no header line"),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV4\n", "expected rows GPU0..GPU1"),
        ("\tGPU0\tGPU1\nGPU0\t X \tFOO\nGPU1\tFOO\t X \n", "unknown link kind 'FOO'"),
        ("\tGPU0\tGPU1\nGPU0\t X\nGPU1\tNV1\t X \n", "too few"),
    ],
)
def test_unparseable_text_is_refused_with_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(TopologyParseError, match=message):
        parse_topology(text)


def test_query_gpu_rows_give_model_and_memory_in_bytes() -> None:
    text = "0, NVIDIA H200, 143771\n1, NVIDIA H200, 143771\n"
    assert parse_query_gpu(text) == (
        GpuDevice(0, "NVIDIA H200", 143_771 * 2**20),
        GpuDevice(1, "NVIDIA H200", 143_771 * 2**20),
    )
    rtx = parse_query_gpu("0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 97887\n")
    assert rtx[0].memory_bytes == 97_887 * 2**20


@pytest.mark.parametrize("text", ["0, NVIDIA H200\n", "zero, NVIDIA H200, 1\n"])
def test_malformed_query_rows_are_refused(text: str) -> None:
    with pytest.raises(TopologyParseError):
        parse_query_gpu(text)
