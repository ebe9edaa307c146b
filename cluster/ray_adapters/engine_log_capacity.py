"""vLLM's own capacity figures, read from an engine's start-up lines.

Pure: the replica's log lines in (its engine's and workers' included, as
`serve_control._replica_reports` reads them), `CapacityFigures` out. The lines, as vLLM 0.1x
to 0.3x print them:

- "Model loading took 71.66 GiB memory and 312.5 seconds" (GPU worker; older versions
  "Model loading took 71.66 GiB and 312.5 seconds");
- "Available KV cache memory: 14.71 GiB" (GPU worker);
- "Explicitly set (1.00/23.4) GiB for KV cache on node 0." (CPU worker, for the space it is
  given: VLLM_CPU_KVCACHE_SPACE or --kv-cache-memory-bytes);
- "GPU KV cache size: 449,600 tokens" ("CPU KV cache size" on the CPU engine);
- "Estimated CUDA graph memory: 4.70 GiB total" and "Graph capturing finished in 12 secs,
  took 1.05 GiB" (the estimate wins where both are printed: it is what the KV budget lost).

With tensor parallel every rank logs its own lines; the engine uses the smallest KV cache,
so the figures kept are the smallest KV and the largest weights and graphs seen.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from domain.engine_capacity import CapacityFigures

_GIB = r"([0-9]+(?:\.[0-9]+)?)"
_WEIGHTS = re.compile(rf"Model loading took {_GIB} ?GiB")
_AVAILABLE_KV = re.compile(rf"Available KV cache memory: {_GIB} ?GiB")
_EXPLICIT_KV = re.compile(rf"Explicitly set \({_GIB}/[0-9.]+\) GiB for KV cache")
_KV_TOKENS = re.compile(r"(?:GPU|CPU|XPU|TPU)(?: \+ host)? KV cache size: ([0-9,]+) tokens")
_GRAPH_ESTIMATE = re.compile(rf"Estimated CUDA graph memory: {_GIB} ?GiB")
_GRAPH_TAKEN = re.compile(rf"Graph capturing finished in [0-9.]+ secs?, took {_GIB} ?GiB")


def logged_capacity(lines: Iterable[str]) -> CapacityFigures:
    weights: float | None = None
    kv_gib: float | None = None
    tokens: int | None = None
    estimate: float | None = None
    taken: float | None = None
    for line in lines:
        if found := _WEIGHTS.search(line):
            weights = max(weights or 0.0, float(found[1]))
        if found := _AVAILABLE_KV.search(line) or _EXPLICIT_KV.search(line):
            value = float(found[1])
            kv_gib = value if kv_gib is None else min(kv_gib, value)
        if found := _KV_TOKENS.search(line):
            count = int(found[1].replace(",", ""))
            tokens = count if tokens is None else min(tokens, count)
        if found := _GRAPH_ESTIMATE.search(line):
            estimate = max(estimate or 0.0, float(found[1]))
        if found := _GRAPH_TAKEN.search(line):
            taken = max(taken or 0.0, float(found[1]))
    return CapacityFigures(
        weights_gib=weights,
        kv_cache_gib=kv_gib,
        kv_cache_tokens=tokens,
        cuda_graph_gib=estimate if estimate is not None else taken,
    )
