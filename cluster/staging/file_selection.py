"""Which of a repo's files a vLLM deployment needs, decided before anything is downloaded.

Many repos ship the same weights twice (safetensors plus PyTorch `.bin`, GGUF, or an
`original/` consolidated copy). vLLM loads safetensors when they exist, so staging the
other copies would double the bytes a swap waits for and the disk it needs.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

_SAFETENSORS_SUFFIX = ".safetensors"
# Weight formats vLLM does not read when safetensors are present.
_ALTERNATIVE_WEIGHT_SUFFIXES = frozenset(
    {".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack", ".onnx", ".ot", ".tflite", ".ckpt"}
)
# Folders that hold a second copy of the weights in another layout.
_DUPLICATE_WEIGHT_FOLDERS = frozenset({"original"})
# Repository plumbing that is never part of a model.
_REPO_PLUMBING = frozenset({".gitattributes"})


def has_safetensors(paths: Iterable[str]) -> bool:
    return any(path.endswith(_SAFETENSORS_SUFFIX) for path in paths)


def is_alternative_weight_file(path: str) -> bool:
    """True for weights in another format or folder than the safetensors vLLM loads."""
    pure = PurePosixPath(path)
    return pure.suffix in _ALTERNATIVE_WEIGHT_SUFFIXES or (
        len(pure.parts) > 1 and pure.parts[0] in _DUPLICATE_WEIGHT_FOLDERS
    )


def select_files(paths: Iterable[str]) -> list[str]:
    """The files to stage, in the given order: drop plumbing, and duplicate weights when
    safetensors exist (a repo with only `.bin` weights keeps them)."""
    all_paths = [path for path in paths if PurePosixPath(path).name not in _REPO_PLUMBING]
    if not has_safetensors(all_paths):
        return all_paths
    return [path for path in all_paths if not is_alternative_weight_file(path)]
