"""Write real safetensors files (the documented format: u64 header length, JSON, data).

Used to give the weight-size readers real checkpoints without numpy or torch.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path

_DTYPE_BYTES = {"BF16": 2, "F8_E4M3": 1, "I32": 4, "F32": 4}


def write_safetensors(path: Path, tensors: Mapping[str, tuple[str, list[int]]]) -> int:
    """Write zero-filled tensors {name: (dtype, shape)}; returns the data bytes written."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = _DTYPE_BYTES[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))
    return offset
