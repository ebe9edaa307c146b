"""Where a start's time goes, from Ray's worker timestamps and vLLM's own log lines.

The log is a real Kimi-K2.5 miniature replica's, on the CPU (eager), as Ray wrote it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from cluster.fleet.startup_steps import STEPS, WorkerTimes, parse_engine_log, startup_steps

pytestmark = pytest.mark.unit

LOG = Path(__file__).with_name("logs") / "kimi_replica_cpu.out"


def _at(text: str) -> float:
    return datetime.strptime(f"2026-{text}", "%Y-%m-%d %H:%M:%S").timestamp()


def test_vllms_start_lines_are_read_from_a_real_cpu_replica_log() -> None:
    engine = parse_engine_log(LOG.read_text().splitlines(), year=2026)
    assert engine.load_started == _at("12-01 17:25:44")
    assert engine.weight_load_s == pytest.approx(0.081974 + 0.02)
    assert engine.kv_cache_s == pytest.approx(0.67)
    assert engine.eager and engine.compile_s is None
    assert engine.ready == _at("12-01 17:25:46")


def test_the_steps_run_from_the_deploy_to_running_then_the_warm_up() -> None:
    engine = parse_engine_log(LOG.read_text().splitlines(), year=2026)
    deploy = _at("12-01 17:24:52")
    worker = WorkerTimes(launch_requested=deploy + 2.0, ready=deploy + 8.0)
    steps = startup_steps(
        deploy_started=deploy,
        running=_at("12-01 17:25:48"),
        worker=worker,
        engine=engine,
        warm_up_s=0.4,
    )
    assert list(steps.seconds) == list(STEPS)
    assert steps.seconds["scheduling"] == pytest.approx(2.0)
    assert steps.seconds["replica_process"] == pytest.approx(6.0)
    assert steps.seconds["engine_start"] == pytest.approx(52 - 8.0)  # 17:24:52+8 -> 17:25:44
    assert steps.seconds["compile"] is None, "eager on the CPU: no compile or graph capture"
    assert steps.seconds["replica_ready"] == pytest.approx(2.0)
    assert steps.seconds["warm_up"] == pytest.approx(0.4)
    assert "compile absent" in steps.describe()


def test_a_start_without_vllm_lines_says_so_rather_than_guessing() -> None:
    steps = startup_steps(
        deploy_started=100.0,
        running=104.0,
        worker=WorkerTimes(launch_requested=101.0, ready=103.0),
        engine=None,
        warm_up_s=0.1,
    )
    assert steps.seconds["weight_load"] is None and steps.seconds["kv_cache"] is None
    assert steps.seconds["replica_ready"] == pytest.approx(1.0)


def test_a_gpu_engines_compile_and_graph_capture_are_summed() -> None:
    lines = [
        "(EngineCore pid=1) INFO 12-01 10:00:00 [x.py:1] Starting to load model /m...",
        "(EngineCore pid=1) INFO 12-01 10:00:30 [x.py:1] Model loading took 53.75 GiB and "
        "29.1 seconds",
        "(EngineCore pid=1) INFO 12-01 10:00:50 [x.py:1] torch.compile takes 18.5 s in total",
        "(EngineCore pid=1) INFO 12-01 10:01:00 [x.py:1] Graph capturing finished in 9 secs",
        "(EngineCore pid=1) INFO 12-01 10:01:05 [x.py:1] init engine (profile, create kv "
        "cache, warmup model) took 34.2 seconds",
    ]
    engine = parse_engine_log(lines, year=2026)
    assert engine.weight_load_s == pytest.approx(29.1)
    assert engine.compile_s == pytest.approx(27.5)
    assert engine.kv_cache_s == pytest.approx(34.2)
    assert engine.ready == _at("12-01 10:01:05")
