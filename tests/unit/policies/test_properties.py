"""Property tests over random configs and clusters (hypothesis).

- a layout marked valid never violates any rule, re-checked here from first principles;
- weights per GPU x GPUs >= total weights, for every candidate;
- what is recommended is valid and fits, and a fitting layout holds a full-length request.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.admission import AdmissionRequest, Candidate, admit
from policies.checkpoint.hf_config import parse_hf_config
from policies.checkpoint.model_spec import ModelSpec
from policies.inventory import BUILTIN_GPU_PROFILES, ClusterInventory, Interconnect
from policies.layout_rules import MODEL_RULES

QUANTS: list[dict[str, Any] | None] = [
    None,
    {"quant_method": "fp8", "weight_block_size": [128, 128]},
    {"quant_method": "fp8", "weight_block_size": [64, 64]},
    {"quant_method": "fp8"},
]


@st.composite
def gqa_configs(draw: st.DrawFn) -> dict[str, Any]:
    heads = draw(st.sampled_from([8, 12, 16, 24, 32, 40, 48, 64, 96, 128]))
    kv = draw(st.sampled_from([d for d in range(1, heads + 1) if heads % d == 0]))
    head_dim = draw(st.sampled_from([64, 128]))
    hidden = draw(st.integers(8, 64)) * 128
    moe = draw(st.booleans())
    cfg: dict[str, Any] = {
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": head_dim,
        "num_hidden_layers": draw(st.integers(2, 96)),
        "vocab_size": draw(st.integers(1000, 260_000)),
        "max_position_embeddings": draw(st.sampled_from([4096, 32768, 131072, 262144])),
        "torch_dtype": "bfloat16",
    }
    quant = draw(st.sampled_from(QUANTS))
    if quant is not None:
        cfg["quantization_config"] = quant
    if moe:
        cfg.update(
            architectures=["MiniMaxM2ForCausalLM"],
            num_local_experts=draw(st.sampled_from([8, 16, 60, 64, 128, 256])),
            num_experts_per_tok=draw(st.integers(1, 8)),
            intermediate_size=draw(st.integers(1, 48)) * 64,
        )
    else:
        cfg.update(
            architectures=["LlamaForCausalLM"],
            intermediate_size=draw(st.integers(8, 400)) * 64,
        )
    return cfg


@st.composite
def mla_configs(draw: st.DrawFn) -> dict[str, Any]:
    heads = draw(st.sampled_from([16, 32, 64, 128]))
    cfg: dict[str, Any] = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "hidden_size": draw(st.integers(8, 64)) * 128,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "num_hidden_layers": draw(st.integers(2, 64)),
        "vocab_size": draw(st.integers(1000, 200_000)),
        "max_position_embeddings": draw(st.sampled_from([4096, 163840])),
        "q_lora_rank": draw(st.sampled_from([None, 1536])),
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "n_routed_experts": draw(st.sampled_from([64, 160, 256, 384])),
        "n_shared_experts": draw(st.integers(0, 2)),
        "num_experts_per_tok": draw(st.integers(1, 8)),
        "moe_intermediate_size": draw(st.integers(2, 32)) * 64,
        "intermediate_size": draw(st.integers(8, 300)) * 64,
        "first_k_dense_replace": draw(st.integers(0, 3)),
        "torch_dtype": "bfloat16",
    }
    quant = draw(st.sampled_from(QUANTS))
    if quant is not None:
        cfg["quantization_config"] = quant
    return cfg


clusters = st.builds(
    ClusterInventory.homogeneous,
    gpu=st.sampled_from(sorted(BUILTIN_GPU_PROFILES)),
    nodes=st.integers(1, 3),
    gpus_per_node=st.sampled_from([1, 2, 4, 6, 8]),
    disk_free_gib=st.sampled_from([None, 100.0, 10_000.0]),
)
requests = st.builds(
    AdmissionRequest,
    max_model_len=st.sampled_from([None, 2048, 32768]),
    gpu_memory_utilization=st.sampled_from([0.5, 0.9, 0.95]),
)


def _violates_first_principles(spec: ModelSpec, c: Candidate, gpus_per_node: int) -> list[str]:
    """vLLM's layout rules restated independently of policies.layout_rules."""
    tp, layout, att, problems = c.layout.tp, c.layout, spec.attention, []
    if att.num_heads % tp:
        problems.append("heads")
    if att.mla is None and att.num_kv_heads % tp and tp % att.num_kv_heads:
        problems.append("kv heads")
    if layout.pp > spec.num_layers:
        problems.append("pp > layers")
    if layout.ep and spec.moe is None:
        problems.append("ep without experts")
    gpu = BUILTIN_GPU_PROFILES[c.gpu]
    if tp > gpus_per_node and gpu.interconnect is Interconnect.PCIE:
        problems.append("tp across pcie nodes")
    quant = spec.quantization
    if quant.block_size is not None:
        bn, bk = quant.block_size
        if spec.moe is not None:
            split = 1 if layout.ep else tp * layout.dp
            inter = spec.moe.expert_intermediate_size
            if inter % split or (inter // split) % bn or (split > 1 and (inter // split) % bk):
                problems.append("expert blocks")
        if tp > 1:
            dims = [att.num_heads * att.head_dim, att.num_heads * att.v_head_dim]
            if spec.num_dense_layers:
                dims.append(spec.dense_intermediate_size)
            if spec.moe is not None and spec.moe.shared_intermediate_size:
                dims.append(spec.moe.shared_intermediate_size)
            for dim in dims:
                if dim % tp or (dim // tp) % min(bn, bk):
                    problems.append(f"block dim {dim}")
    return problems


def _check(cfg: dict[str, Any], cluster: ClusterInventory, request: AdmissionRequest) -> None:
    spec = parse_hf_config(cfg)
    decision = admit(spec, None, cluster, request)
    gpus_per_node = cluster.nodes[0].gpus
    total = decision.weights.total_bytes
    for c in decision.candidates:
        if c.valid:
            assert not _violates_first_principles(spec, c, gpus_per_node), (str(c.layout), cfg)
            assert all(rule(spec, c.layout) is None for rule in MODEL_RULES)
        assert c.weights_bytes_per_gpu * c.layout.total_gpus >= total, str(c.layout)
        if c.fits and not spec.attention.has_sliding_full_mix:
            assert c.kv_cache_tokens >= decision.max_model_len
            assert c.max_concurrency >= 1
    if decision.recommended is not None:
        assert decision.recommended.valid and decision.recommended.fits
        assert decision.admitted
    else:
        assert not decision.admitted


@settings(max_examples=60, deadline=None)
@given(cfg=gqa_configs(), cluster=clusters, request=requests)
def test_gqa_models_valid_layouts_obey_every_rule_and_hold_all_weights(
    cfg: dict[str, Any], cluster: ClusterInventory, request: AdmissionRequest
) -> None:
    _check(cfg, cluster, request)


@settings(max_examples=40, deadline=None)
@given(cfg=mla_configs(), cluster=clusters, request=requests)
def test_mla_models_valid_layouts_obey_every_rule_and_hold_all_weights(
    cfg: dict[str, Any], cluster: ClusterInventory, request: AdmissionRequest
) -> None:
    _check(cfg, cluster, request)
