"""How close `switchyard plan`'s predictions come to published measurements.

Not a test: it prints predicted / measured for each figure below, writes them to
benchmarks/results/planner_calibration.json, and redraws the suite's block in BENCHMARKS.md
with `--write`. Every measured figure names its source; none of them was used to tune a
constant unless its row says "fitted".

    python -m benchmarks run planner-calibration [--write]

Sources:
- story: ../shared/reference/README.md section 1 (8x RTX PRO 6000 Blackwell, PCIe), and the
  vLLM log quoted in issue 18: MiniMax-M2.5 FP8 TP4, gpu_memory_utilization 0.9, defaults,
  "Available KV cache memory: 23.62 GiB ... GPU KV cache size: 399,424 tokens".
- spark396: https://github.com/eugr/spark-vllm-docker/issues/396 -- MiniMax-M2.7 AWQ
  (the M2.5 attention: 62 layers, 8 KV heads of 128) at TP2 on 2x DGX Spark, vLLM 0.29:
  "23.25 GiB KV cache is needed" for max_model_len 196,608; CUDA-graph profiling turns
  utilization 0.80 into 0.758 (an estimate of 0.042 x the GPU's memory).
- recipes12: https://github.com/vllm-project/recipes/pull/12 -- Qwen3-Coder-480B-A35B FP8,
  DP8 + EP on H20 nodes, vLLM 0.10.1: "62.00 GiB KV cache is needed" for 262,144 tokens.

The KV cache sizes themselves are checked, cross-validated, against real vLLM logs by
`python -m benchmarks run kv-calibration`, which also fits the memory model's two fitted
constants; the CUDA-graph row below is an independent check of one of them.
"""

from __future__ import annotations

import argparse
import copy
import json
from dataclasses import asdict, dataclass, replace
from typing import Any

from benchmarks.records import output_arguments, publish, run_record
from benchmarks.suites import REPO_ROOT, suite_of
from cluster.miniature_generator.reference import load_reference_config
from policies.admission import AdmissionRequest, Candidate, admit
from policies.checkpoint.hf_config import parse_hf_config
from policies.checkpoint.model_spec import ModelSpec
from policies.checkpoint.parameters import model_bytes
from policies.engine_memory import EngineSettings, MemoryTerm, cuda_graph_bytes
from policies.inventory import ClusterInventory, gpu_profile
from policies.layout import Layout
from policies.memory import KvCacheDtype, kv_bytes_per_token_per_layer, request_kv_bytes
from policies.throughput import throughput
from policies.units import GIB

SUITE = suite_of(__name__)
FIXTURES = REPO_ROOT / "tests" / "unit" / "policies" / "fixtures"


@dataclass(frozen=True)
class Row:
    figure: str
    source: str
    predicted: float
    measured: float
    unit: str
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.predicted / self.measured


def _spec(name: str) -> ModelSpec:
    return parse_hf_config(load_reference_config(f"{name}.config.json"))


def _qwen3_coder_480b() -> ModelSpec:
    """Qwen3-Coder-480B-A35B-Instruct-FP8's dimensions on the Qwen3-MoE FP8 fixture."""
    data = json.loads((FIXTURES / "Qwen3-235B-A22B-FP8.config.json").read_text())
    data = copy.deepcopy(data)
    data.update(
        hidden_size=6144,
        num_hidden_layers=62,
        num_attention_heads=96,
        num_key_value_heads=8,
        num_experts=160,
        moe_intermediate_size=2560,
        max_position_embeddings=262_144,
    )
    return parse_hf_config(data)


def _candidate(spec: ModelSpec, weights_gib: float, layout: Layout, gpus: int) -> Candidate:
    inventory = ClusterInventory.homogeneous("rtx-pro-6000", 1, gpus)
    request = AdmissionRequest(weights_override_bytes=int(weights_gib * GIB), layout=layout)
    return admit(spec, None, inventory, request).candidates[0]


def _at_concurrency(spec: ModelSpec, weights_gib: float, layout: Layout, concurrency: int) -> float:
    from policies.checkpoint.weights import override_weights

    shape = model_bytes(spec).scaled_to(override_weights(spec, int(weights_gib * GIB)))
    return throughput(
        spec,
        shape,
        layout,
        gpu_profile("rtx-pro-6000"),
        kv_cache_dtype=KvCacheDtype.AUTO,
        gpus_per_node=8,
        kv_cache_tokens=concurrency * 1024,
        max_num_seqs=concurrency,
    ).tokens_per_second


def rows() -> list[Row]:
    minimax, kimi = _spec("MiniMax-M2.5"), _spec("Kimi-K2.5")
    tp4 = _candidate(minimax, 214.3, Layout(tp=4), 4)
    tp4_ep = _candidate(minimax, 214.3, Layout(tp=4, ep=True), 4)
    kimi_tp8 = _candidate(kimi, 540e9 / GIB, Layout(tp=8), 8)
    out = [
        Row(
            "MiniMax-M2.5 TP4 weights per GPU",
            "story log",
            tp4.memory_breakdown[MemoryTerm.WEIGHTS] / GIB,
            53.75,
            "GiB",
            "214.3 GiB on disk / 4",
        ),
        Row(
            "MiniMax-M2.5 TP4+EP single stream",
            "story",
            tp4_ep.decode_tok_s_ceiling,
            84,
            "tok/s",
            "a ceiling: > 1 expected",
        ),
        Row(
            "MiniMax-M2.5 TP4+EP at high concurrency",
            "story",
            tp4_ep.throughput_tok_s_ceiling,
            4000,
            "tok/s",
            f"ceiling at {tp4_ep.saturation_concurrency} sequences",
        ),
        Row(
            "Kimi-K2.5 NVFP4 TP8 single stream",
            "story",
            kimi_tp8.decode_tok_s_ceiling,
            61,
            "tok/s",
            "a ceiling; the INT4 config's shape at NVFP4's 540 GB",
        ),
        Row(
            "Kimi-K2.5 NVFP4 TP8 at 128 concurrent",
            "story",
            _at_concurrency(kimi, 540e9 / GIB, Layout(tp=8), 128),
            1238,
            "tok/s",
            "a ceiling",
        ),
    ]
    # spark396: one full-length request's KV at TP2 (4 KV heads per GPU).
    per_layer = kv_bytes_per_token_per_layer(minimax, 2, KvCacheDtype.AUTO)
    need = request_kv_bytes(minimax, range(minimax.num_layers), per_layer, 196_608)
    out.append(Row("MiniMax-M2.7 TP2 KV for 196,608 tokens", "spark396", need / GIB, 23.25, "GiB"))
    gb10 = replace(
        gpu_profile("rtx-pro-6000"),
        name="gb10",
        memory_bytes=int(119.7 * GIB),
        compute_capability=(12, 1),
    )
    graphs = cuda_graph_bytes(
        minimax, Layout(tp=2), gb10, EngineSettings(8192, 1024), range(minimax.num_layers)
    )
    out.append(
        Row(
            "MiniMax-M2.7 TP2 CUDA-graph estimate",
            "spark396",
            graphs / GIB,
            0.042 * 119.7,
            "GiB",
            "vLLM 0.29's estimate; GB10 memory taken as 119.7 GiB",
        )
    )
    coder = _qwen3_coder_480b()
    per_layer = kv_bytes_per_token_per_layer(coder, 1, KvCacheDtype.AUTO)
    need = request_kv_bytes(coder, range(coder.num_layers), per_layer, 262_144)
    out.append(
        Row("Qwen3-Coder-480B DP8 KV for 262,144 tokens", "recipes12", need / GIB, 62.0, "GiB")
    )
    return out


def table(found: list[Row]) -> str:
    lines = [
        "| figure | source | predicted | measured | predicted / measured | note |",
        "|---|---|---:|---:|---:|---|",
    ]
    for r in found:
        lines.append(
            f"| {r.figure} | {r.source} | {r.predicted:,.2f} {r.unit} | {r.measured:,.2f} "
            f"{r.unit} | {r.ratio:.3f} | {r.note} |"
        )
    return "\n".join(lines)


def markdown(document: dict[str, Any]) -> str:
    """The suite's block in BENCHMARKS.md, from its result file."""
    found = [Row(**row) for row in document["rows"]]
    return f"Command: `{document['command']}`\n\n{table(found)}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=SUITE.command, description=__doc__.splitlines()[0])
    output_arguments(parser)
    args = parser.parse_args(argv)
    document = {**run_record(SUITE, argv), "rows": [asdict(row) for row in rows()]}
    print(table([Row(**row) for row in document["rows"]]))
    publish(SUITE, document, args, markdown(document))
    return 0
