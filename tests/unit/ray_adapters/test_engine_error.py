"""A failed deployment is reported with the engine's own root cause, found in its log."""

from __future__ import annotations

from pathlib import Path

from cluster.ray_adapters.engine_error import root_cause_lines, summarize_failure

SERVE_MESSAGE = (
    "A replica failed to start with exception. Error: ray::ServeReplica:model-x.initialize() "
    "(pid=4242, ip=10.0.0.1) Traceback (most recent call last): ...\n"
    "RuntimeError: Engine core initialization failed. See root cause above."
)
_PREFIX = "(Worker pid=99) ERROR 11-30 07:54:54 [multiproc_executor.py:953] "
WORKER_LOG = (
    "(Worker pid=99) INFO loading weights\n"
    f"{_PREFIX}Traceback (most recent call last):\n"
    f"{_PREFIX}safetensors._safetensors_rust.SafetensorError: Error while deserializing "
    "header: incomplete metadata, file not fully covered\n"
    "RuntimeError: Engine core initialization failed. See root cause above.\n"
)


def test_root_cause_lines_skip_vllms_generic_wrapper() -> None:
    lines = root_cause_lines(WORKER_LOG)
    assert lines == [
        "safetensors._safetensors_rust.SafetensorError: Error while deserializing header: "
        "incomplete metadata, file not fully covered"
    ]


def test_the_replicas_log_supplies_the_root_cause(tmp_path: Path) -> None:
    (tmp_path / "worker-abc-01000000-4242.out").write_text(WORKER_LOG)
    summary = summarize_failure(SERVE_MESSAGE, tmp_path)
    assert summary.startswith("safetensors._safetensors_rust.SafetensorError")
    assert "(Serve: A replica failed" in summary
    assert "\n" not in summary


def test_without_a_readable_log_serves_message_is_kept_on_one_line(tmp_path: Path) -> None:
    summary = summarize_failure(SERVE_MESSAGE, tmp_path / "missing")
    assert summary.startswith("A replica failed to start")
    assert "\n" not in summary
    assert summarize_failure(SERVE_MESSAGE, None) == summary


def test_another_processs_log_is_not_blamed(tmp_path: Path) -> None:
    (tmp_path / "worker-abc-01000000-7777.out").write_text(WORKER_LOG)
    assert "SafetensorError" not in summarize_failure(SERVE_MESSAGE, tmp_path)
