"""Random weights for a recipe's tensors, written as one safetensors file.

Each tensor's values come from its own generator, seeded by the miniature's seed and the
tensor's name, so a tensor's values do not depend on which other tensors exist or their order.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from cluster.miniature_generator.recipe import TensorDtype, TensorInit, TensorSpec

WEIGHTS_FILE = "model.safetensors"


def tensor_seed(seed: int, name: str) -> int:
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def make_tensor(spec: TensorSpec, *, seed: int, std: float) -> Any:
    """A torch tensor with the spec's shape and dtype (torch is imported here, not at load)."""
    import numpy as np
    import torch

    if spec.init is TensorInit.ONES:
        values = np.ones(spec.shape, dtype=np.float32)
    elif spec.init is TensorInit.ZEROS:
        values = np.zeros(spec.shape, dtype=np.float32)
    else:
        # numpy's PCG64 stream is stable across numpy releases, torch's CPU normal is not promised.
        rng = np.random.default_rng(tensor_seed(seed, spec.name))
        values = rng.standard_normal(spec.shape, dtype=np.float32) * np.float32(std)
    tensor = torch.from_numpy(values)
    if spec.dtype is TensorDtype.BFLOAT16:
        return tensor.to(torch.bfloat16)
    return tensor


def write_weights(model_dir: Path, specs: tuple[TensorSpec, ...], *, seed: int, std: float) -> Path:
    from safetensors.torch import save_file

    tensors = {spec.name: make_tensor(spec, seed=seed, std=std) for spec in specs}
    path = model_dir / WEIGHTS_FILE
    save_file(tensors, str(path), metadata={"format": "pt"})
    path.chmod(0o644)  # safetensors creates it private; the model dir is read by other users
    return path
