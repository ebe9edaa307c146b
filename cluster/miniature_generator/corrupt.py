"""Breaks a model directory's weights on purpose, for tests of failed loads and rollback."""

from __future__ import annotations

import struct
from pathlib import Path


def corrupt_weights(model_dir: Path) -> None:
    """Truncate every safetensors file of `model_dir` in the middle of its tensor data.

    The header still parses, so the file looks like a checkpoint, but its tensors end early:
    safetensors (and so vLLM) refuses to load it ("incomplete metadata, file not fully
    covered"). config.json and the tokenizer stay intact, so the failure is in the weight
    load, as with a real damaged download.
    """
    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors files in {model_dir}")
    for path in files:
        with path.open("r+b") as handle:
            (header_len,) = struct.unpack("<Q", handle.read(8))
            data_start = 8 + header_len
            size = path.stat().st_size
            handle.truncate(data_start + (size - data_start) // 2)
