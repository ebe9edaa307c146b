"""Real vLLM (the CPU build) loads each miniature, generates from it, and holds in its KV
cache exactly what the admission policy predicts.

Each miniature gets one engine, started once in a subprocess (the CPU engine spawns workers,
so it must be created under `__main__`), and every test of that miniature reads the same
report: MiniMax's at TP=2 (GQA with the KV heads split over the ranks). Kimi's MLA at TP=2
(the latent replicated on both ranks) is the real engine of test_placement.py, placed by
Serve, whose logged KV cache is checked against the same count there; Kimi's chat template
serves on the real stack. At TP=1 the suite's real stack checks the same
thing for every engine it starts: `status --json`'s logged and predicted KV tokens
(tests/integration/test_observability.py), and the Llama miniature serves there.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cluster.miniature_generator import write_miniature
from policies.checkpoint.hf_config import load_model_spec
from policies.layout import Layout
from policies.memory import KvCacheDtype, kv_bytes_per_token_per_gpu
from tests.support.vllm_cpu import needs_vllm_cpu

PROBE = Path(__file__).with_name("engine_probe.py")
REPORT_PREFIX = "ENGINE_PROBE_REPORT "
TP = {"minimax-m2.5": 2}
KV_CACHE_SPACE_GIB = 1
MAX_MODEL_LEN = 1024
TOKENS = 16
CHAT_PROMPT = "<|im_start|>user\nHello, which model are you?<|im_end|>\n<|im_start|>assistant\n"


pytestmark = needs_vllm_cpu


@dataclass(frozen=True)
class EngineReport:
    name: str
    tp: int
    model_dir: Path
    config: dict[str, Any]
    probe: dict[str, Any]
    logged_kv_cache_tokens: int


@pytest.fixture(scope="module")
def model_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("miniatures")


@pytest.fixture(scope="module", params=tuple(TP))
def engine(request: pytest.FixtureRequest, model_root: Path) -> EngineReport:
    name: str = request.param
    tp = TP[name]
    if tp > (os.cpu_count() or 1):
        pytest.skip(f"TP={tp} on the CPU needs {tp} cores")
    model_dir = write_miniature(name, model_root / name)
    # One OpenMP thread per rank, each bound to its own core.
    bind = {"VLLM_CPU_OMP_THREADS_BIND": "|".join(str(i) for i in range(tp))} if tp > 1 else {}
    env = dict(
        os.environ,
        VLLM_CPU_KVCACHE_SPACE=str(KV_CACHE_SPACE_GIB),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        **bind,
    )
    # Eager mode skips torch.compile, which would add about a minute per engine on 2 cores.
    command = [
        sys.executable,
        str(PROBE),
        str(model_dir),
        f"--max-model-len={MAX_MODEL_LEN}",
        f"--tokens={TOKENS}",
        f"--tp={tp}",
        "--enforce-eager",
    ]
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    output = done.stdout + done.stderr
    if done.returncode != 0:
        pytest.fail(f"vLLM failed on {name} (exit {done.returncode}):\n{output[-6000:]}")
    report_lines = [line for line in done.stdout.splitlines() if line.startswith(REPORT_PREFIX)]
    assert len(report_lines) == 1, output[-6000:]
    logged = re.search(r"KV cache size: ([\d,]+) tokens", output)
    assert logged is not None, output[-6000:]
    report = EngineReport(
        name=name,
        tp=tp,
        model_dir=model_dir,
        config=json.loads((model_dir / "config.json").read_text()),
        probe=json.loads(report_lines[0][len(REPORT_PREFIX) :]),
        logged_kv_cache_tokens=int(logged.group(1).replace(",", "")),
    )
    summary = {key: value for key, value in report.probe.items() if not key.endswith("_ids")}
    print(f"\n{name}: {json.dumps(summary)}")
    return report


def kv_bytes_per_token(config: dict[str, Any], tp: int) -> int:
    """What one token costs in one rank's KV cache at BF16, from the config alone."""
    layers = int(config["num_hidden_layers"])
    if "kv_lora_rank" in config:  # MLA: one latent vector plus the rotary key per layer,
        # the same on every rank (replicated, not split)
        return layers * (int(config["kv_lora_rank"]) + int(config["qk_rope_head_dim"])) * 2
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    heads_per_rank = max(1, int(config["num_key_value_heads"]) // tp)
    return 2 * layers * heads_per_rank * int(head_dim) * 2


def test_vllm_generates_the_requested_tokens_from_each_miniature(engine: EngineReport) -> None:
    token_ids = engine.probe["completion_token_ids"]
    assert len(token_ids) == TOKENS
    assert all(0 <= token < engine.config["vocab_size"] for token in token_ids)


def test_vllm_renders_the_chat_template_and_answers(engine: EngineReport) -> None:
    assert engine.probe["chat_prompt"] == CHAT_PROMPT
    assert len(engine.probe["chat_token_ids"]) == TOKENS


def test_the_kv_cache_holds_the_space_given_over_the_configs_bytes_per_token(
    engine: EngineReport, record_property: Any
) -> None:
    block_size = engine.probe["block_size"]
    bytes_per_token = kv_bytes_per_token(engine.config, engine.tp)
    expected_blocks = KV_CACHE_SPACE_GIB * 2**30 // bytes_per_token // block_size
    record_property("kv_bytes_per_token", bytes_per_token)
    record_property("kv_cache_tokens", engine.probe["kv_cache_tokens"])
    record_property("engine_start_s", engine.probe["engine_start_s"])
    assert engine.probe["num_gpu_blocks"] == expected_blocks
    assert engine.probe["kv_cache_tokens"] == expected_blocks * block_size
    assert engine.logged_kv_cache_tokens == engine.probe["kv_cache_tokens"]


def test_vllm_cpu_kv_cache_holds_what_the_policy_predicts(
    engine: EngineReport, record_property: Any
) -> None:
    spec = load_model_spec(engine.model_dir)
    per_token = kv_bytes_per_token_per_gpu(spec, Layout(tp=engine.tp), KvCacheDtype.AUTO)
    block = engine.probe["block_size"]
    predicted_blocks = KV_CACHE_SPACE_GIB * 2**30 // (per_token * block)
    record_property("kv_bytes_per_token_per_gpu", per_token)
    assert engine.probe["num_gpu_blocks"] == predicted_blocks
