"""`switchyard bench` flags: defaults, and bad values exit 2 with one line naming the flag."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from domain.exit_codes import ExitCode
from switchyard.bench.bench_config import BenchConfig
from switchyard.cli import build_parser, main
from switchyard.commands import bench


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SWITCHYARD_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("SWITCHYARD_HOME", str(tmp_path / "home"))


def _config(*flags: str) -> BenchConfig:
    args = build_parser().parse_args(["bench", *flags])
    config = bench.build_config(args, Path(os.environ["SWITCHYARD_HOME"]))
    assert isinstance(config, BenchConfig)
    return config


def test_defaults_follow_the_issue() -> None:
    config = _config()
    assert config.concurrency == (1, 8, 32, 128)
    assert config.url == "http://127.0.0.1:8000/v1"
    assert config.model == "default"
    assert config.request_rate_per_s is None
    assert config.api_key is None


def test_flags_reach_the_config(tmp_path: Path) -> None:
    tok = tmp_path / "tok"
    tok.mkdir()
    config = _config(
        "--url",
        "http://10.0.0.5:9000",
        "--model",
        "mini-llama",
        "--api-key",
        "s3cret",
        "--concurrency",
        "4,1",
        "--num-prompts",
        "8",
        "--input-len",
        "16",
        "--output-len",
        "8",
        "--request-rate",
        "2.5",
        "--num-warmups",
        "0",
        "--json",
        str(tmp_path / "r.json"),
        "--plot",
        str(tmp_path / "r.png"),
        "--tokenizer",
        str(tok),
    )
    assert config.model_dump() == {
        "url": "http://10.0.0.5:9000/v1",
        "model": "mini-llama",
        "api_key": "s3cret",
        "concurrency": (4, 1),
        "num_prompts": 8,
        "input_len": 16,
        "output_len": 8,
        "request_rate_per_s": 2.5,
        "num_warmups": 0,
        "json_path": tmp_path / "r.json",
        "plot_path": tmp_path / "r.png",
        "tokenizer_dir": tok,
        "seed": 0,
        "during_swap": None,
    }


def test_during_swap_runs_one_steady_level_and_names_the_swap_like_switchyard_swap() -> None:
    config = _config("--during-swap", "mini-kimi-k2.5", "miniature:minimax-m2.5", "--name", "mm")
    assert config.concurrency == (bench.DURING_SWAP_CONCURRENCY,)
    assert config.during_swap is not None
    assert config.during_swap.model_dump() == {
        "old": "mini-kimi-k2.5",
        "source": "miniature:minimax-m2.5",
        "new_name": "mm",
        "swap_delay_s": 5.0,
        "swap_tail_s": 5.0,
        "address": None,
        "strategy": "auto",
        "prefetch_weights": True,
        "deploy_early": True,
    }
    forced = _config(
        "--during-swap", "a", "miniature:llama", "--name", "b", "--strategy", "break-before-make"
    )
    assert forced.during_swap is not None
    assert forced.during_swap.strategy == "break-before-make"
    steady = _config("--during-swap", "a", "miniature:llama", "--name", "b", "--concurrency", "2")
    assert steady.concurrency == (2,)


def test_the_api_key_defaults_to_the_first_switchyard_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SWITCHYARD_API_KEY", "first, second")
    assert _config().api_key == "first"


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        (["--concurrency", "1,x"], "--concurrency"),
        (["--concurrency", "0,8"], "--concurrency"),
        (["--concurrency", "8,8"], "--concurrency"),
        (["--concurrency", ""], "--concurrency"),
        (["--num-prompts", "0"], "--num-prompts"),
        (["--num-prompts", "many"], "--num-prompts"),
        (["--input-len", "-1"], "--input-len"),
        (["--output-len", "0"], "--output-len"),
        (["--request-rate", "0"], "--request-rate"),
        (["--request-rate", "-3"], "--request-rate"),
        (["--request-rate", "nan"], "--request-rate"),
        (["--num-warmups", "-1"], "--num-warmups"),
        (["--plot", "out.jpg"], "--plot"),
        (["--tokenizer", "/no/such/dir"], "--tokenizer"),
        (["--url", "ftp://host/v1"], "--url"),
        (["--model", ""], "--model"),
        (["--json", "same.png", "--plot", "same.png"], "--json"),
        (["--during-swap", "old", "miniature:llama"], "--name"),
        (["--name", "new"], "--name"),
        (["--during-swap", "old", "miniature:llama", "--name", "old"], "--name"),
        (
            ["--during-swap", "a", "miniature:llama", "--name", "b", "--concurrency", "1,8"],
            "--concurrency",
        ),
        (["--during-swap", "a", "miniature:llama", "--name", "b", "--plot", "x.png"], "--plot"),
        (
            ["--during-swap", "a", "miniature:llama", "--name", "b", "--swap-delay", "-1"],
            "--swap-delay",
        ),
        (
            ["--during-swap", "a", "miniature:llama", "--name", "b", "--swap-tail", "9999"],
            "--swap-tail",
        ),
    ],
)
def test_a_bad_value_exits_2_with_one_line_naming_the_flag(
    capsys: pytest.CaptureFixture[str], flags: list[str], flag: str
) -> None:
    code: int | str | None
    try:
        code = main(["bench", *flags])
    except SystemExit as exit_:
        code = exit_.code  # argparse's own type errors
    assert code == ExitCode.BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert flag in err


def test_without_a_tokenizer_or_a_local_stack_the_error_asks_for_tokenizer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["bench", "--url", "http://10.1.2.3:8000/v1"])
    assert code == ExitCode.BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--tokenizer" in err
