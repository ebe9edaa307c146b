"""A tiny fake checkpoint for staging tests: a few small files shaped like a sharded model."""

from __future__ import annotations

import json
import random

REPO = "acme/tiny-model"
SHARD_1 = "model-00001-of-00002.safetensors"
SHARD_2 = "model-00002-of-00002.safetensors"


def tiny_model_files(shard_bytes: int = 300_000, seed: int = 1) -> dict[str, bytes]:
    """A few small files shaped like a sharded checkpoint (not loadable by vLLM)."""
    rng = random.Random(seed)
    return {
        "config.json": json.dumps({"architectures": ["LlamaForCausalLM"], "seed": seed}).encode(),
        "tokenizer.json": b'{"model": "' + b"t" * 2000 + b'"}',
        "model.safetensors.index.json": json.dumps(
            {"weight_map": {"a": SHARD_1, "b": SHARD_2}}
        ).encode(),
        SHARD_1: rng.randbytes(shard_bytes),
        SHARD_2: rng.randbytes(shard_bytes * 2 // 3),
        "pytorch_model.bin": b"duplicate weights vLLM does not need" * 100,
    }
