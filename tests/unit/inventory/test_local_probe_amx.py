"""The probe reads AMX from the CPU's flags, as vLLM's CPU platform decides on them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.inventory.local_probe import cpu_amx_tiles

pytestmark = pytest.mark.unit


def test_amx_is_read_from_the_flags_line(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx512f amx_bf16 amx_tile\n")
    assert cpu_amx_tiles(cpuinfo)
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2\n")
    assert not cpu_amx_tiles(cpuinfo)
    assert not cpu_amx_tiles(tmp_path / "missing")
