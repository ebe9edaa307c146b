"""`python -m benchmarks list | run SUITE [options] | report SUITE...` (see __init__.py)."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from types import ModuleType

from benchmarks.records import write_block
from benchmarks.suites import BENCHMARKS_MD, SUITES, Suite, find


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="python -m benchmarks", description="The project's own side-by-side measurements."
    )
    commands = top.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="name every suite and what it measures")
    run = commands.add_parser("run", help="run one suite; options after its name are its own")
    run.add_argument("suite", choices=[s.name for s in SUITES])
    run.add_argument("options", nargs=argparse.REMAINDER, help="the suite's options (--help)")
    report = commands.add_parser(
        "report", help="redraw suites' BENCHMARKS.md blocks from their result files, no run"
    )
    report.add_argument("suites", nargs="+", choices=[s.name for s in SUITES], metavar="SUITE")
    report.add_argument("--markdown", type=Path, default=BENCHMARKS_MD)
    return top


def suite_module(suite: Suite) -> ModuleType:
    return importlib.import_module(suite.module)


def report(suite: Suite, markdown: Path) -> None:
    """Redraw `suite`'s block from its one result file alone."""
    if not suite.result.exists():
        raise SystemExit(f"{suite.name}: no result at {suite.result}; run the suite first")
    document = json.loads(suite.result.read_text())
    write_block(markdown, suite, suite_module(suite).markdown(document))
    print(f"{suite.name}: redrew its block in {markdown} from {suite.result}")


def main(argv: list[str]) -> int:
    # `run SUITE ...` hands everything after the name to the suite's own parser untouched
    # (argparse's REMAINDER would swallow a leading --help meant for the suite).
    if len(argv) >= 2 and argv[0] == "run":
        suite = find(argv[1])
        code: int = suite_module(suite).main(argv[2:])
        return code
    args = parser().parse_args(argv)
    if args.command == "list":
        width = max(len(s.name) for s in SUITES)
        for suite in SUITES:
            print(f"{suite.name:<{width}}  {suite.summary}")
    elif args.command == "report":
        for name in args.suites:
            report(find(name), args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
