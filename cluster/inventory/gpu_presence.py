"""Is there an NVIDIA GPU on this machine? One answer for every caller.

`switchyard up --accelerator auto` and the test suite's GPU tier ask this; the node probe
(`local_probe.read_gpus`) answers it while reading the full inventory. They all go through
`read_gpus`, so `up` picks the GPU build exactly where the probe will then report GPUs.
"""

from __future__ import annotations

from cluster.inventory.local_probe import read_gpus


def has_nvidia_gpu() -> bool:
    """Whether NVML, or `nvidia-smi` where NVML cannot be loaded, sees at least one GPU."""
    return bool(read_gpus([]).devices)
