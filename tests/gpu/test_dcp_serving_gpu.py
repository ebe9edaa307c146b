"""Decode context parallel on real GPUs: the engine Switchyard configures for an MLA
miniature at TP2 x DCP2 starts and decodes, and the planner judges that layout valid on the
GPU's profile.

Needs two NVIDIA GPUs and vLLM's CUDA build (`make setup-gpu`); skipped otherwise.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.miniature_generator import write_miniature
from domain.deployment_config import ModelDeploymentConfig
from policies.admission import AdmissionRequest, admit
from policies.checkpoint.hf_config import load_model_spec
from policies.inventory import ClusterInventory, gpu_profile
from policies.layout import Layout
from serve_apps.engine.model_app import engine_kwargs_for

pytestmark = pytest.mark.gpu


def _gpu_count() -> int:
    torch = pytest.importorskip("torch")
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def test_an_mla_engine_serves_with_dcp2(tmp_path: Path) -> None:
    if _gpu_count() < 2:
        pytest.skip("decode context parallel needs TP >= 2: two GPUs")
    vllm = pytest.importorskip("vllm")
    model_dir = write_miniature("kimi-k2.5", tmp_path / "kimi")
    config = ModelDeploymentConfig.model_validate(
        {
            "name": "kimi-dcp",
            "source": "miniature:kimi-k2.5",
            "layout": {"tp": 2, "dcp": 2},
            "accelerator": {"kind": "gpu"},
            "engine": {"max_model_len": 2048, "gpu_memory_utilization": 0.5},
        }
    )
    kwargs = engine_kwargs_for(config)
    assert kwargs["decode_context_parallel_size"] == 2
    llm = vllm.LLM(model=str(model_dir), **kwargs)
    out = llm.generate(["hello"] * 4, vllm.SamplingParams(max_tokens=16, ignore_eos=True))
    assert all(len(o.outputs[0].token_ids) == 16 for o in out)

    # The planner's verdict for this layout on the real GPU kind: admitted, DCP candidate.
    import torch

    from policies.errors import UnknownGpu

    name = torch.cuda.get_device_name(0)
    try:
        profile = gpu_profile(name)
    except UnknownGpu:
        pytest.skip(f"no built-in profile for {name!r}")
    decision = admit(
        load_model_spec(model_dir),
        None,
        ClusterInventory.homogeneous(profile, 1, 2),
        AdmissionRequest(layout=Layout(tp=2, dcp=2), max_model_len=2048),
    )
    assert decision.candidates[0].valid, decision.candidates[0].reasons
