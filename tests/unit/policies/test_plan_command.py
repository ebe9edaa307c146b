"""`switchyard plan`: the CLI contract of issue 3 (file and directory forms; no network)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from switchyard.cli import main
from tests.unit.policies.conftest import reference_config
from tests.unit.policies.safetensors_files import write_safetensors

REPO_ROOT = Path(__file__).resolve().parents[3]


def reference_path(name: str) -> str:
    return str(
        resources.files("cluster.miniature_generator").joinpath(
            f"reference_configs/{name}.config.json"
        )
    )


def run_plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_minimax_on_the_rtx_box_is_admitted_with_exit_0_and_the_json_shape(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run_plan(
        capsys,
        reference_path("MiniMax-M2.5"),
        "--gpu",
        "rtx-pro-6000",
        "--gpus-per-node",
        "8",
        "--disk-free-gib",
        "1200",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert data["admitted"] is True
    assert data["reasons"] == []
    assert data["recommended"] in data["candidates"]
    tp8 = next(
        c for c in data["candidates"] if (c["tp"], c["pp"], c["dp"], c["ep"]) == (8, 1, 1, False)
    )
    assert tp8["valid"] is False
    assert any(
        "192 is not divisible by weight quantization block_n = 128" in r for r in tp8["reasons"]
    )


def test_rejection_exits_1_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_plan(
        capsys,
        reference_path("MiniMax-M2.5"),
        "--gpu",
        "rtx-pro-6000",
        "--gpus-per-node",
        "8",
        "--disk-free-gib",
        "200",
        "--json",
    )
    assert code == 1
    data = json.loads(out)
    assert data["admitted"] is False
    assert data["recommended"] is None
    assert any(r.startswith("disk_insufficient: ") for r in data["reasons"])


def test_kimi_on_four_gpus_is_rejected_in_the_human_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run_plan(
        capsys, reference_path("Kimi-K2.5"), "--gpu", "rtx-pro-6000", "--gpus-per-node", "4"
    )
    assert code == 1
    assert "REJECTED" in out
    assert "weights_exceed_memory" in out
    assert "KimiK25ForConditionalGeneration" in out


def test_human_output_marks_the_recommended_layout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_plan(
        capsys,
        reference_path("Kimi-K2.5"),
        "--gpu",
        "rtx-pro-6000",
        "--gpus-per-node",
        "8",
        "--kv-cache-dtype",
        "fp8",
        "--gpu-memory-utilization",
        "0.93",
    )
    assert code == 0
    assert "ADMITTED: recommended for throughput TP" in out
    assert "per GPU (GiB): weights" in out
    assert "*TP" in out


def test_a_model_directory_is_measured_from_its_safetensors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(reference_config("MiniMax-M2.5")))
    write_safetensors(tmp_path / "model.safetensors", {"w": ("BF16", [1024, 1024])})
    code, out, _ = run_plan(capsys, str(tmp_path), "--gpu", "h100", "--gpus-per-node", "1")
    assert code == 0
    assert "safetensors_headers" in out


def test_weights_override_changes_the_weights_per_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    args = [reference_path("MiniMax-M2.5"), "--gpu", "h200", "--gpus-per-node", "8", "--json"]
    _, out, _ = run_plan(capsys, *args)
    _, bigger, _ = run_plan(capsys, *args, "--weights-gib", "400")
    first = json.loads(out)["candidates"][0]
    tp = {(c["tp"], c["pp"], c["dp"], c["ep"]): c for c in json.loads(bigger)["candidates"]}
    key = (first["tp"], first["pp"], first["dp"], first["ep"])
    assert tp[key]["weights_gib_per_gpu"] > first["weights_gib_per_gpu"]


MINIMAX = reference_path("MiniMax-M2.5")
CLUSTER = ["--gpu", "h200", "--gpus-per-node", "8"]


def test_the_vllm_version_and_its_sampler_variable_size_the_kv_cache(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def tokens(*flags: str) -> int:
        code, out, _ = run_plan(capsys, MINIMAX, *CLUSTER, "--json", *flags)
        assert code == 0
        return int(json.loads(out)["recommended"]["kv_cache_tokens"])

    sorting = tokens("--vllm-version", "0.16")
    assert sorting < tokens("--vllm-version", "0.16", "--flashinfer-sampler", "on")
    assert sorting < tokens("--vllm-version", "0.17")
    # From 0.17 the variable only chooses between FlashInfer and Triton, never the sort.
    assert tokens("--vllm-version", "0.17", "--flashinfer-sampler", "off") == tokens(
        "--vllm-version", "0.17"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["does/not/exist.json", *CLUSTER], "neither an existing file"),
        ([MINIMAX, "--gpu", "tpu-v5", "--gpus-per-node", "8"], "unknown GPU kind 'tpu-v5'"),
        ([MINIMAX, "--gpu", "h200", "--gpus-per-node", "0"], "--gpus-per-node must be >= 1, got 0"),
        ([MINIMAX, *CLUSTER, "--nodes", "0"], "--nodes must be >= 1"),
        ([MINIMAX, *CLUSTER, "--gpu-memory-utilization", "1.5"], "must be in (0, 1]"),
        ([MINIMAX, *CLUSTER, "--disk-free-gib", "-3"], "--disk-free-gib must be >= 0"),
        ([MINIMAX, *CLUSTER, "--weights-gib", "0"], "--weights-gib must be > 0"),
        ([MINIMAX, *CLUSTER, "--max-model-len", "0"], "--max-model-len must be >= 1"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run_plan(capsys, *argv)
    assert code == 2
    assert out == ""
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_an_unsupported_architecture_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"architectures": ["MambaForCausalLM"]}))
    code, _, err = run_plan(capsys, str(config), "--gpu", "h200", "--gpus-per-node", "8")
    assert code == 2
    assert "'MambaForCausalLM' is not supported" in err


def test_non_numeric_values_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", reference_path("MiniMax-M2.5"), "--gpu", "h200", "--gpus-per-node", "x"])
    assert exit_info.value.code == 2


def test_plan_imports_no_ray_torch_vllm_or_transformers() -> None:
    script = (
        "import sys\n"
        "from switchyard.cli import main\n"
        f"main(['plan', {reference_path('Kimi-K2.5')!r}, '--gpu', 'h200', '--gpus-per-node', '8',"
        " '--json'])\n"
        "heavy = {'ray', 'torch', 'vllm', 'transformers'}\n"
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}), file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_plan_json_on_a_512_node_cluster_is_bounded_and_counts_what_it_leaves_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = (reference_path("Kimi-K2.5"), "--gpu", "h100", "--gpus-per-node", "8", "--json")
    code, out, _ = run_plan(capsys, *args, "--nodes", "512", "--max-candidates", "50")
    assert code == 0
    bounded = json.loads(out)
    code, out, _ = run_plan(capsys, *args, "--nodes", "512", "--max-candidates", "0")
    everything = json.loads(out)

    assert len(bounded["candidates"]) == 50
    assert bounded["candidates_total"] == len(everything["candidates"]) > 50
    assert sum(bounded["candidates_left_out"].values()) == bounded["candidates_total"] - 50
    # The recommended layouts are always listed, and the listed keep their order.
    for chosen in [bounded["recommended"], *bounded["recommended_by_objective"].values()]:
        assert chosen in bounded["candidates"]
    order = [everything["candidates"].index(c) for c in bounded["candidates"]]
    assert order == sorted(order)
    assert "candidates_total" not in everything
    assert {k: v for k, v in bounded.items() if not k.startswith("candidates")} == {
        k: v for k, v in everything.items() if k != "candidates"
    }
