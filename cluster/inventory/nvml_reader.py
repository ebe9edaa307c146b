"""Read a node's GPUs through NVML (`nvidia-ml-py`, imported lazily: CPU installs lack it)."""

from __future__ import annotations

from typing import Any

from cluster.inventory.cuda_memory import cuda_totals, normalised_bus_id
from cluster.inventory.records import GpuDevice, GpuFacts, GpuFactSource
from policies.inventory import Interconnect


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used on this node (module or driver missing, no device)."""


def read_nvml() -> GpuFacts:
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable("the pynvml module (nvidia-ml-py) is not installed") from exc
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"nvmlInit failed: {exc}") from exc
    try:
        return _read_devices(pynvml)
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"NVML query failed: {exc}") from exc
    finally:
        pynvml.nvmlShutdown()


def _read_devices(nvml: Any) -> GpuFacts:
    count = int(nvml.nvmlDeviceGetCount())
    if count == 0:
        raise NvmlUnavailable("NVML sees no GPU")
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    cuda = cuda_totals()
    devices = []
    for index, handle in enumerate(handles):
        model = _text(nvml.nvmlDeviceGetName(handle))
        bus = normalised_bus_id(_text(nvml.nvmlDeviceGetPciInfo(handle).busId))
        devices.append(
            GpuDevice(
                index,
                model,
                int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
                cuda_memory_bytes=cuda.get(bus),
            )
        )
    pairs = [(a, b) for a in range(count) for b in range(count) if a != b]
    nvlink = [_p2p_ok(nvml, handles[a], handles[b], "NVML_P2P_CAPS_INDEX_NVLINK") for a, b in pairs]
    read = [_p2p_ok(nvml, handles[a], handles[b], "NVML_P2P_CAPS_INDEX_READ") for a, b in pairs]
    return GpuFacts(
        devices=tuple(devices),
        interconnect=interconnect_from_pairs(nvlink),
        source=GpuFactSource.NVML,
        p2p_ok=None if not read or None in read else all(read),
    )


def _text(value: bytes | str) -> str:
    # nvidia-ml-py < 11.5 returns bytes.
    return value.decode() if isinstance(value, bytes) else str(value)


def _p2p_ok(nvml: Any, a: Any, b: Any, caps: str) -> bool | None:
    try:
        status = nvml.nvmlDeviceGetP2PStatus(a, b, getattr(nvml, caps))
    except nvml.NVMLError:
        return None  # not supported by this driver or device
    return bool(status == nvml.NVML_P2P_STATUS_OK)


def interconnect_from_pairs(nvlink_pairs: list[bool | None]) -> Interconnect | None:
    """NVLINK only when every ordered GPU pair reports NVLink P2P; None when there is no pair
    or the driver could not say for any of them."""
    if not nvlink_pairs or all(p is None for p in nvlink_pairs):
        return None
    return Interconnect.NVLINK if all(p is True for p in nvlink_pairs) else Interconnect.PCIE
