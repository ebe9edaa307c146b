"""`switchyard bench` against a stack (Ray + Serve + the gateway; the Llama miniature on a
fake engine, which counts prompt tokens with the miniature's own tokenizer, as vLLM does),
through the CLI, finding the tokenizer from the stack itself.

On the fake stack (tests/support/shared_stacks.py); its last tests swap `small` from the
Llama miniature to a second one (`mini-llama-b`, make-before-break) and a third
(`mini-llama-c`, break-before-make).

Only sanity is asserted (no errors, exact lengths, positive throughput, TTFT within E2E):
performance numbers belong to benchmarks/, never to tests.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import shared_stacks
from tests.support.running_stack import (
    SWITCHYARD,
    RunningStack,
    stack_env,
)

API_KEY = shared_stacks.API_KEY
MODEL = "small"
"""The Llama miniature (fake engine) on the fake stack: the bench is the subject."""
INPUT_LEN = 16
OUTPUT_LEN = 8
NUM_PROMPTS = 8
LEVELS = (1, 4)


@pytest.fixture(scope="module")
def stack(fake_stack: RunningStack) -> RunningStack:
    return fake_stack


def _bench(stack: RunningStack, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SWITCHYARD, "bench", "--url", stack.base_url, *flags],
        capture_output=True,
        text=True,
        timeout=600,
        env=stack_env(stack.state_dir),
        check=False,
    )


@pytest.fixture(scope="module")
def sweep(
    stack: RunningStack, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("bench-out")
    result = _bench(
        stack,
        "--model", MODEL,
        "--api-key", API_KEY,
        "--concurrency", ",".join(str(c) for c in LEVELS),
        "--num-prompts", str(NUM_PROMPTS),
        "--input-len", str(INPUT_LEN),
        "--output-len", str(OUTPUT_LEN),
        "--num-warmups", "1",
        "--json", str(out / "sweep.json"),
        "--plot", str(out / "sweep.png"),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    document: dict[str, Any] = json.loads((out / "sweep.json").read_text())
    return result, document, out / "sweep.png"


def test_the_sweep_reports_every_level_without_errors(sweep: Any) -> None:
    result, document, _ = sweep
    assert [level["concurrency"] for level in document["levels"]] == list(LEVELS)
    for level in document["levels"]:
        assert (level["completed"], level["failed"], level["errors"]) == (NUM_PROMPTS, 0, [])
    assert "concurrency" in result.stdout
    assert "api_key" not in document["config"]
    assert API_KEY not in json.dumps(document)


def test_every_request_has_the_exact_prompt_and_output_lengths(sweep: Any) -> None:
    _, document, _ = sweep
    for level in document["levels"]:
        assert len(level["requests"]) == NUM_PROMPTS
        for request in level["requests"]:
            assert request["prompt_tokens"] == INPUT_LEN
            assert request["output_tokens"] == OUTPUT_LEN
        assert level["total_output_tokens"] == NUM_PROMPTS * OUTPUT_LEN


def test_the_numbers_are_sane(sweep: Any) -> None:
    _, document, _ = sweep
    for level in document["levels"]:
        assert level["output_tokens_per_s"] > 0
        assert level["total_tokens_per_s"] > level["output_tokens_per_s"]
        assert level["request_throughput_per_s"] > 0
        for request in level["requests"]:
            assert 0 < request["ttft_ms"] <= request["e2el_ms"]
            assert request["tpot_ms"] > 0
        for metric in ("ttft", "tpot", "itl", "e2el"):
            summary = level[metric]
            assert 0 <= summary["p50_ms"] <= summary["p90_ms"] <= summary["p99_ms"]
        assert level["ttft"]["p50_ms"] <= level["e2el"]["p50_ms"]


def test_the_tokenizer_came_from_the_stacks_miniature_source(sweep: Any) -> None:
    result, document, _ = sweep
    assert "miniature:llama" in result.stderr
    assert Path(document["config"]["tokenizer"], "tokenizer.json").is_file()


def test_the_plot_is_a_png(sweep: Any) -> None:
    _, _, png = sweep
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_wrong_api_key_stops_at_the_warm_up_with_the_reason(stack: RunningStack) -> None:
    result = _bench(
        stack, "--model", MODEL, "--api-key", "wrong", "--concurrency", "1",
        "--num-prompts", "1", "--input-len", "4", "--output-len", "2",
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "warm-up" in last and "HTTP 401" in last


def _swap_bench(
    stack: RunningStack, out: Path, old: str, new: str, *flags: str
) -> subprocess.CompletedProcess[str]:
    """`bench --during-swap OLD miniature:llama --name NEW` under a steady load on `small`."""
    return _bench(
        stack,
        "--model", MODEL,
        "--api-key", API_KEY,
        "--concurrency", "4",
        "--num-prompts", str(NUM_PROMPTS),
        "--input-len", str(INPUT_LEN),
        "--output-len", str(OUTPUT_LEN),
        "--swap-delay", "3",
        "--swap-tail", "3",
        "--during-swap", old, "miniature:llama",
        "--name", new,
        *flags,
        "--json", str(out),
    )  # fmt: skip


# Last in this module: the swaps move `small` to other models.
def test_a_load_through_a_hot_swap_fails_nothing_and_reports_the_swap(
    stack: RunningStack, tmp_path: Path
) -> None:
    out = tmp_path / "swap.json"
    result = _swap_bench(stack, out, "mini-llama", "mini-llama-b")
    assert result.returncode == 0, result.stdout + result.stderr
    document: dict[str, Any] = json.loads(out.read_text())
    swap, window = document["swap"], document["window"]
    assert swap["outcome"] == "done", swap["message"]
    # Make-before-break: NEW starts beside OLD, the aliases move, then OLD drains and goes.
    phases = ["preflight", "deploying_new", "switching", "draining", "removing_old"]
    assert list(swap["phase_seconds"]) == phases
    assert [p["phase"] for p in window["phases"]] == phases
    # The phases lie inside the load, in order, on the clients' clock.
    starts = [p["start_s"] for p in window["phases"]]
    assert starts[0] > 0 and starts == sorted(starts)
    assert all(p["seconds"] >= 0 for p in window["phases"])
    assert (window["failed"], window["errors"]) == (0, [])
    assert window["answered_by"]["mini-llama"] > 0
    assert window["answered_by"]["mini-llama-b"] > 0
    # NEW fits beside OLD on the stack's free slots: make-before-break, nothing held, and
    # the largest gap between completions is what clients saw of the swap.
    assert swap["strategy"] == "make-before-break", swap
    assert window["held_requests"] == 0 and window["server_hold_s"] == 0
    assert window["longest_completion_gap"] is not None
    assert document["load"]["failed"] == 0
    assert all(r["error"] is None for r in document["requests"])
    assert API_KEY not in json.dumps(document)
    assert "unavailability" in result.stdout and "deploying_new" in result.stdout
    assert "make-before-break" in result.stdout


def test_a_forced_break_before_make_holds_and_loses_nothing(
    stack: RunningStack, tmp_path: Path
) -> None:
    out = tmp_path / "swap.json"
    result = _swap_bench(
        stack, out, "mini-llama-b", "mini-llama-c", "--strategy", "break-before-make"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    document: dict[str, Any] = json.loads(out.read_text())
    swap, window = document["swap"], document["window"]
    assert swap["strategy"] == "break-before-make"
    phases = ["preflight", "draining", "removing_old", "deploying_new", "switching"]
    assert list(swap["phase_seconds"]) == phases
    assert (window["failed"], window["errors"]) == (0, [])
    # Requests sent while the alias was held waited and were answered by NEW.
    assert window["held_requests"] >= 1
    assert window["unavailability_s"] > 0 and window["server_hold_s"] > 0
    assert window["longest_held_s"] > 0
    assert window["answered_by"]["mini-llama-c"] > 0
