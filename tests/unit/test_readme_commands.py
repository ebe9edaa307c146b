"""The README's two commands are exactly the Makefile's targets, and CI calls the test one."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return [line.split("#", 1)[0].strip() for line in block.group(1).splitlines() if line.strip()]


def _make_targets() -> set[str]:
    makefile = (REPO / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z][\w-]*):", makefile, re.M))


def test_readme_gives_exactly_make_run_and_make_test() -> None:
    assert _readme_commands() == ["make run", "make test"]


def test_both_readme_commands_are_makefile_targets() -> None:
    targets = _make_targets()
    assert {"run", "test", "setup"} <= targets


def test_ci_runs_the_readme_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test" in ci
