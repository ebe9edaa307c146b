"""What CUDA gives a process on each GPU, asked of the driver library (`libcuda.so.1`).

vLLM budgets `gpu_memory_utilization` of `torch.cuda.mem_get_info()`'s total, which is the
device's memory less what the driver reserves for itself: on an H100 80GB HBM3 about 0.46 GiB
below NVML's total, on an RTX PRO 6000 about 0.62 GiB. `cuDeviceTotalMem` gives the same figure
without creating a CUDA context, so no GPU memory is taken to read it.

It runs in a child process: `cuInit` stays in whatever process calls it (and CUDA does not
survive a fork after it). The child orders devices by PCI bus id and sees all of them, as NVML
numbers them, and reports each device's bus id so the two are matched by bus, not by index.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache

_TIMEOUT_S = 30.0

_CHILD = r"""
import ctypes, json
cuda = ctypes.CDLL("libcuda.so.1")
if cuda.cuInit(0) != 0:
    raise SystemExit("cuInit failed")
count = ctypes.c_int()
cuda.cuDeviceGetCount(ctypes.byref(count))
found = {}
for index in range(count.value):
    device = ctypes.c_int()
    cuda.cuDeviceGet(ctypes.byref(device), index)
    total = ctypes.c_size_t()
    if cuda.cuDeviceTotalMem_v2(ctypes.byref(total), device) != 0:
        continue
    bus = ctypes.create_string_buffer(32)
    cuda.cuDeviceGetPCIBusId(bus, 32, device)
    found[bus.value.decode().lower()] = total.value
print(json.dumps(found))
"""


@cache
def cuda_totals() -> dict[str, int]:
    """Bytes CUDA gives a process, by lower-case PCI bus id ("0000:18:00.0"); empty when the
    driver library cannot be loaded or asked (a CPU machine, a container without it).

    Cached for the process: a device's memory does not change while it runs."""
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            env=env,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    if done.returncode != 0:
        return {}
    try:
        found = json.loads(done.stdout)
    except ValueError:
        return {}
    return {str(bus): int(total) for bus, total in found.items()}


def normalised_bus_id(bus_id: str) -> str:
    """NVML's "00000000:18:00.0" as CUDA's "0000:18:00.0" (both lower case)."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    return f"{domain[-4:]}:{rest}" if rest else bus_id.strip().lower()
