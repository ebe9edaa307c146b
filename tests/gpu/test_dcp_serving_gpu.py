"""Decode context parallel on real GPUs: the engine Switchyard deploys for an MLA miniature at
TP2 x DCP2 starts and decodes, and the planner judges that layout valid on the GPU's profile.

Needs two NVIDIA GPUs and vLLM's CUDA build; skipped otherwise (with one GPU: the layout needs
TP >= 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cluster.miniature_generator import write_miniature
from policies.admission import AdmissionRequest, admit
from policies.checkpoint.hf_config import load_model_spec
from policies.errors import UnknownGpu
from policies.inventory import ClusterInventory, gpu_profile
from policies.layout import Layout
from tests.gpu.conftest import gpu_count
from tests.gpu.product_engine import ProductEngine, dcp_config

pytestmark = pytest.mark.gpu


def test_an_mla_engine_serves_with_dcp2(
    ray_for_engines: str, cuda_vllm: Any, tmp_path: Path
) -> None:
    if gpu_count() < 2:
        pytest.skip("decode context parallel needs TP >= 2: two GPUs")
    model_dir = write_miniature("kimi-k2.5", tmp_path / "kimi")
    config = dcp_config()
    engine = ProductEngine(config, model_dir)
    try:
        assert engine.tokens(max_tokens=16) == 16
    finally:
        engine.shutdown()

    # The planner's verdict for this layout on the real GPU kind: admitted, DCP candidate.
    import torch

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
