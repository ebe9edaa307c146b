"""The declarative fleet end to end on the fake stack (real Ray, Serve, gateway, registry and
manager; fake engine replicas: the fleet manager is the subject): a file applied over the
running fleet; an edit (one model swapped for another, one alias moved, one engine setting
changed) that `diff` lists exactly and `apply`, run as a Ray job, carries out under load with
no failed request; `export` round-trips; a second `apply` does nothing; bad files and a
layout vLLM would refuse change nothing.

Tests run in file order; they leave the fake stack serving the edited file (`default` ->
mini-kimi, `small` -> m-b, `fast` -> m-c). The same flow on real engines (tool calls, a
file's `max_model_len`) is tests/integration/test_fleet_file_engines.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.client_pool import ClientPool
from tests.support.running_stack import RunningStack
from tests.support.shared_stacks import API_KEY
from tests.support.story_swap import ray_job

BASE = """\
models:
  - {name: m-a, source: 'miniature:llama', aliases: [default], layout: {tp: 1}}
  - {name: m-b, source: 'miniature:llama', aliases: [small, fast], layout: {tp: 1},
     engine: {max_model_len: 256}}
  - {name: m-c, source: 'miniature:minimax-m2.5', layout: {tp: 1}}
"""
EDITED = """\
models:
  - {name: mini-kimi, source: 'miniature:kimi-k2.5', aliases: [default], layout: {tp: 1}}
  - {name: m-b, source: 'miniature:llama', aliases: [small], layout: {tp: 1},
     engine: {max_model_len: 384}}
  - {name: m-c, source: 'miniature:minimax-m2.5', aliases: [fast], layout: {tp: 1}}
"""


@pytest.fixture(scope="module")
def stack(fake_stack: RunningStack, tmp_path_factory: pytest.TempPathFactory) -> RunningStack:
    return fake_stack


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("fleet-files")
    (directory / "base.yaml").write_text(BASE)
    (directory / "fleet.yaml").write_text(EDITED)
    return directory


def _diff(stack: RunningStack, path: Path) -> dict[str, Any]:
    result = stack.cli("diff", "-f", str(path), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    plan: dict[str, Any] = json.loads(result.stdout)
    return plan


def _exported(stack: RunningStack) -> str:
    result = stack.cli("export")
    assert result.returncode == 0, result.stderr
    return result.stdout


def _fleet(stack: RunningStack) -> dict[str, str]:
    """model -> app, and alias -> model, as `status` shows them."""
    status = stack.status()
    models: Any = status["models"]
    shown = {m["name"]: m["app"] for m in models}
    aliases: Any = status.get("aliases", {})
    return {**shown, **{f"alias {a}": m for a, m in aliases.items()}}


def test_a_file_applied_over_the_running_fleet_makes_it_match(
    stack: RunningStack, files: Path
) -> None:
    result = stack.cli("apply", "-f", str(files / "base.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the fleet matches" in result.stdout
    assert _diff(stack, files / "base.yaml") == {"changes": [], "admitted": True}


def test_diff_lists_exactly_the_edit_in_apply_order(stack: RunningStack, files: Path) -> None:
    plan = _diff(stack, files / "fleet.yaml")
    steps = [(c["action"], c["model"], c.get("replaces"), c.get("alias")) for c in plan["changes"]]
    assert steps == [
        ("swap", "mini-kimi", "m-a", None),
        ("swap", "m-b", "m-b", None),
        ("alias", "m-c", None, "fast"),
    ]
    assert plan["admitted"]
    swap, same_name, _ = plan["changes"]
    assert swap["strategy"] in ("make-before-break", "break-before-make")
    assert same_name["changed"] == ["engine"] and same_name["engine"]["max_model_len"] == 384
    assert set(swap["aliases"]) == {"default"}


def test_apply_as_a_ray_job_under_load_fails_no_request(stack: RunningStack, files: Path) -> None:
    before = _fleet(stack)
    with ClientPool(stack.base_url, "default", workers=4, api_key=API_KEY) as pool:
        job = ray_job(stack, "apply", "-f", "fleet.yaml", working_dir=files)
    log = job.stdout + job.stderr
    assert job.returncode == 0, log
    assert pool.report.failures == [], pool.report.failures[:5]
    assert pool.report.ok > 0
    after = _fleet(stack)
    assert after["alias default"] == "mini-kimi" and after["alias fast"] == "m-c"
    assert after["m-b"] != before["m-b"], "m-b runs under its next app generation"
    journal = (stack.state_dir / "manager" / "journal.jsonl").read_text().splitlines()
    entries = [json.loads(line) for line in journal if line.strip()]
    applies = [e for e in entries if e.get("event") == "apply"]
    assert applies[-1]["phase"] == "end" and applies[-1]["done"] is True
    assert applies[-1]["by"].startswith("ray job "), applies[-1]
    assert len(applies[-1]["sha256"]) == 64


def test_export_round_trips_and_a_second_apply_does_nothing(
    stack: RunningStack, files: Path
) -> None:
    exported = files / "exported.yaml"
    exported.write_text(_exported(stack))
    assert _diff(stack, exported)["changes"] == []
    before = _fleet(stack)
    again = stack.cli("apply", "-f", str(files / "fleet.yaml"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "no changes" in again.stdout
    assert _fleet(stack) == before


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("models: [{name: x, source: 'miniature:llama', gpus: 2}]", "gpus"),
        ("models: [{name: x, source: 'miniature:llama', replicas: two}]", "replicas"),
        (
            "models: [{name: x, source: 'miniature:llama', engine: {tool_call_parser: nope}}]",
            "engine.tool_call_parser: 'nope' is not allowed",
        ),
        (
            "models: [{name: x, source: 'miniature:llama'}, {name: x, source: 'miniature:llama'}]",
            "already used",
        ),
        (
            "models: [{name: x, source: 'miniature:llama', aliases: [m-b]},"
            " {name: m-b, source: 'miniature:llama'}]",
            "is the name of a model",
        ),
    ],
)
def test_a_bad_file_exits_2_in_one_line_and_changes_nothing(
    stack: RunningStack, files: Path, body: str, says: str
) -> None:
    bad = files / "bad.yaml"
    bad.write_text(body)
    before = _exported(stack)
    result = stack.cli("apply", "-f", str(bad))
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], result.stderr
    assert _exported(stack) == before


def test_a_layout_vllm_would_refuse_is_refused_by_diff_and_apply(
    stack: RunningStack, files: Path
) -> None:
    refused = files / "refused.yaml"
    kimi = "source: 'miniature:kimi-k2.5', aliases: [default], layout: {tp: "
    refused.write_text(EDITED.replace(kimi + "1}", kimi + "3}"))
    before = _exported(stack)
    diff = stack.cli("diff", "-f", str(refused), "--json")
    assert diff.returncode == 1, diff.stdout + diff.stderr
    plan = json.loads(diff.stdout)
    (change,) = plan["changes"]
    assert not plan["admitted"] and not change["admitted"]
    assert any("heads_not_divisible" in r or "not_enough_gpus" in r for r in change["reasons"])
    applied = stack.cli("apply", "-f", str(refused))
    assert applied.returncode == 1, applied.stdout + applied.stderr
    assert _exported(stack) == before
