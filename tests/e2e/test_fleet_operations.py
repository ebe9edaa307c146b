"""Fleet operations end to end through the CLI and `ray job submit`, on the fake stack
(real Ray, Serve, gateway, registry and manager; fake engine replicas):

- a swap that admission rejects changes nothing and never drains;
- `add --layout auto` takes admission's recommendation for its objective;
- a NEW that cannot load (a truncated checkpoint) is rolled back by itself, under load,
  with no failed request;
- a parked model keeps its name and alias, and a request for it wakes it (held meanwhile);
  `park` and `wake` by hand too;
- on-demand models share the accelerators: the least recently used is parked to make room
  for a wake, by hand or by a request;
- two concurrent changes never interleave;
- a manager killed mid-swap converges to one consistent state.

Tests run in file order. Kimi serves `default` on the fake stack when the module starts;
after it, `default` is served by Kimi or MiniMax (whichever the killed swap left), and the
Llama miniature still serves `small` (woken once: under its next app generation). The story's
swap on real engines is test_hot_swap.py.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai

from tests.support.client_pool import ClientPool
from tests.support.running_stack import SWITCHYARD, RunningStack, stack_env
from tests.support.shared_stacks import API_KEY, KIMI, MINIMAX
from tests.support.story_swap import ray_job
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]


def _client(stack: RunningStack) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.base_url, api_key=API_KEY, max_retries=0, timeout=300)


def _default_model(stack: RunningStack) -> str:
    reply = _client(stack).completions.create(model="default", prompt="hi", max_tokens=2)
    return reply.model


def _journal(stack: RunningStack) -> list[dict[str, object]]:
    path = stack.state_dir / "manager" / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _journal_text(stack: RunningStack) -> str:
    path = stack.state_dir / "manager" / "journal.jsonl"
    return path.read_text() if path.exists() else ""


def test_a_swap_that_admission_rejects_changes_nothing_and_never_drains(
    fake_stack: RunningStack,
) -> None:
    before = len(_journal(fake_stack))
    result = fake_stack.cli(
        "swap", KIMI, "miniature:minimax-m2.5", "--name", "too-wide", "--tp", "5"
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "not admitted" in result.stdout
    new_entries = _journal(fake_stack)[before:]
    phases = [e.get("phase") for e in new_entries if e.get("event") == "phase"]
    assert phases == ["preflight"]
    assert _default_model(fake_stack) == KIMI


def test_add_layout_auto_deploys_admissions_recommendation_for_the_objective(
    fake_stack: RunningStack,
) -> None:
    result = fake_stack.cli(
        "add",
        "miniature:llama",
        "--name",
        "auto-llama",
        "--layout",
        "auto",
        "--objective",
        "latency",
        "--dry-run",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "layout auto: TP" in result.stdout
    assert "(admission's recommendation for latency)" in result.stdout


def test_a_new_model_that_cannot_load_is_rolled_back(
    fake_stack: RunningStack, tmp_path: Path
) -> None:
    broken = tmp_path / "broken-llama"
    made = subprocess.run(
        [SWITCHYARD, "miniature", "llama", str(broken), "--corrupt"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    pool = ClientPool(fake_stack.base_url, "default", workers=4, api_key=API_KEY)
    with pool:
        job = ray_job(fake_stack, "swap", KIMI, str(broken), "--name", "broken-llama")
    log = job.stdout + job.stderr
    assert job.returncode != 0, log
    assert "rolled back" in log, log
    assert "safetensor" in log.lower() or "SafetensorError" in log, log
    # NEW would fit beside OLD: make-before-break, so OLD never stopped serving.
    assert "strategy: make-before-break" in log and "kept serving, untouched" in log, log
    assert pool.report.failures == [], pool.report.failures[:5]
    assert _default_model(fake_stack) == KIMI


def test_a_parked_model_keeps_its_name_and_alias_and_a_request_wakes_it(
    fake_stack: RunningStack,
) -> None:
    client = _client(fake_stack)
    # The Llama miniature behind `small` (earlier modules may have swapped it under
    # another name).
    name = _fleet_json(fake_stack)["aliases"]["small"]
    generation = _generation(fake_stack, name)
    parked = ray_job(fake_stack, "park", name)
    assert parked.returncode == 0, parked.stdout + parked.stderr
    assert f"{name} is parked" in parked.stdout
    assert name in {m.id for m in client.models.list().data}, "/v1/models still lists it"
    assert _parked(fake_stack)[name]

    # Held at the gateway while the manager wakes it, then answered by the woken engine.
    reply = client.completions.create(model="small", prompt="hi", max_tokens=2)
    assert reply.model == name
    model = _model_status(fake_stack, name)
    assert model["state"] == "ready" and model["aliases"] == ["small"]
    assert model["last_wake_s"] > 0 and model["residency"] == "always"
    assert model["app"] == f"model-{name}-g{generation + 1}", "a wake starts the next one"
    wakes = [e for e in _journal(fake_stack) if e.get("kind") == "wake"]
    assert len(wakes) == 1, "one wake however many requests"


def test_on_demand_models_share_the_accelerators_least_recently_used_first(
    fake_stack: RunningStack,
) -> None:
    """The fake head declares 4 stand-in slots; `default` and `small` hold two."""
    client = _client(fake_stack)
    on_demand = ("--residency", "on_demand", "--min-resident-s", "0")
    for name in ("od-a", "od-b"):
        added = fake_stack.cli("add", "miniature:llama", "--name", name, *on_demand)
        assert added.returncode == 0, added.stdout + added.stderr
    assert fake_stack.cli("park", "od-a").returncode == 0
    added = fake_stack.cli("add", "miniature:llama", "--name", "od-c", *on_demand)
    assert added.returncode == 0, added.stdout + added.stderr

    # No slot is free: waking od-a parks the least recently used on-demand model (od-b and
    # od-c were never asked for: the first by name, od-b).
    woken = fake_stack.cli("wake", "od-a")
    assert woken.returncode == 0, woken.stdout + woken.stderr
    parked = _parked(fake_stack)
    assert (parked["od-a"], parked["od-b"], parked["od-c"]) == (False, True, False), parked
    # A request for od-b is held and wakes it, parking od-a (woken by hand, never asked for).
    assert client.completions.create(model="od-b", prompt="hi", max_tokens=2).model == "od-b"
    parked = _parked(fake_stack)
    assert (parked["od-a"], parked["od-b"], parked["od-c"]) == (True, False, False), parked
    for name in ("od-a", "od-b", "od-c"):
        assert fake_stack.cli("remove", name).returncode == 0


def test_two_sleep_mode_models_take_turns_on_the_same_accelerators(
    fake_stack: RunningStack,
) -> None:
    """The fake head's two free slots (`default` and `small` hold the others). The stand-in
    engine implements vLLM's sleep mode, so the real path runs: each rank of a sleep-mode
    engine asks Ray for half a slot, both engines stay placed, a wake puts the other to
    sleep instead of unloading it, and every replica sleeps and wakes."""
    client = _client(fake_stack)
    shared = ("--park-mode", "sleep", "--residency", "on_demand", "--min-resident-s", "0")
    layouts = {"turn-a": ("--replicas", "2"), "turn-b": ("--tp", "2")}
    for name, layout in layouts.items():
        added = fake_stack.cli("add", "miniature:llama", "--name", name, *layout, *shared)
        assert added.returncode == 0, added.stdout + added.stderr
    assert "parked" in added.stdout, "turn-a is awake on both free slots"

    # turn-b's first wake is a cold start beside turn-a, put to sleep; then turn-a wakes
    # where it sleeps, putting turn-b to sleep. Each request is held, then answered.
    for asked, asleep in (("turn-b", "turn-a"), ("turn-a", "turn-b")):
        reply = client.completions.create(model=asked, prompt="hi", max_tokens=2)
        assert reply.model == asked
        models = _fleet_json(fake_stack)["models"]
        assert not models[asked]["parked"]
        assert models[asleep]["parked"] and models[asleep]["asleep_level"] == 1
    turn_a = _fleet_json(fake_stack)["models"]["turn-a"]
    assert turn_a["generation"] == 1 and [w["path"] for w in turn_a["wakes"]] == ["level_1"]
    for name in layouts:
        assert fake_stack.cli("remove", name).returncode == 0


def _fleet_json(stack: RunningStack) -> dict[str, Any]:
    """The manager's recorded fleet (its fleet.json: no driver to join)."""
    fleet: dict[str, Any] = json.loads((stack.state_dir / "manager" / "fleet.json").read_text())
    return fleet


def _parked(stack: RunningStack) -> dict[str, bool]:
    """Which models the manager has recorded parked."""
    return {name: bool(m.get("parked")) for name, m in _fleet_json(stack)["models"].items()}


def _generation(stack: RunningStack, name: str) -> int:
    generation: int = _fleet_json(stack)["models"][name]["generation"]
    return generation


def _model_status(stack: RunningStack, name: str) -> dict[str, Any]:
    status = json.loads(stack.cli("status", "--json").stdout)
    (model,) = [m for m in status["models"] if m["name"] == name]
    found: dict[str, Any] = model
    return found


def test_two_concurrent_changes_never_interleave(fake_stack: RunningStack) -> None:
    env = stack_env(fake_stack.state_dir)
    first = subprocess.Popen(
        [
            SWITCHYARD,
            "add",
            "miniature:llama",
            "--name",
            "mini-llama-3",
            "--state-dir",
            str(fake_stack.state_dir),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(
            lambda: '"name": "mini-llama-3"' in _journal_text(fake_stack),
            120,
            0.2,
            message="the journal never named mini-llama-3",
        )
        second = fake_stack.cli("add", "miniature:llama", "--name", "mini-llama-4", "--dry-run")
    finally:
        out, _ = first.communicate(timeout=900)
    assert first.returncode == 0, out
    # Either refused with a message naming the running change, or run after it: never both
    # at once (the journal's start/end times of the two operations do not overlap).
    if second.returncode != 0:
        assert "another change is running" in second.stdout, second.stdout + second.stderr
    spans: dict[str, list[float]] = {}
    for entry in _journal(fake_stack):
        op_id = str(entry.get("op_id"))
        if entry.get("event") == "start" and "mini-llama-" in json.dumps(entry.get("details")):
            spans[op_id] = [float(str(entry["at"]))]
        elif entry.get("event") == "end" and op_id in spans:
            spans[op_id].append(float(str(entry["at"])))
    intervals = sorted(spans.values())
    assert len(intervals) >= 1
    for earlier, later in itertools.pairwise(intervals):
        assert later[0] >= earlier[-1], f"operations overlapped: {intervals}"
    removed = fake_stack.cli("remove", "mini-llama-3")
    assert removed.returncode == 0, removed.stdout + removed.stderr


# Connected before the swap starts, it kills the manager the moment it reads a line: a fake
# engine starts in seconds, and joining a cluster takes about as long.
_KILL_MANAGER = """
import sys
from cluster.startup.ray_runtime import connect
connect(sys.argv[1])
import ray
from cluster.ray_adapters.manager_actor import manager_actor
manager = manager_actor()
print("ready", flush=True)
sys.stdin.readline()
ray.kill(manager, no_restart=False)
print("killed", flush=True)
"""


def test_killing_the_manager_mid_swap_converges_to_one_consistent_state(
    fake_stack: RunningStack,
) -> None:
    env = stack_env(fake_stack.state_dir)
    address = json.loads((fake_stack.state_dir / "stack.json").read_text())["address"]
    killer = subprocess.Popen(
        [sys.executable, "-c", _KILL_MANAGER, address],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
    )
    assert killer.stdout is not None and killer.stdin is not None
    assert killer.stdout.readline().strip() == "ready"
    before = len(_journal(fake_stack))
    swap = subprocess.Popen(
        [
            SWITCHYARD,
            "swap",
            KIMI,
            "miniature:minimax-m2.5",
            "--name",
            MINIMAX,
            "--state-dir",
            str(fake_stack.state_dir),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def deploying_new() -> bool:
        return any(e.get("phase") == "deploying_new" for e in _journal(fake_stack)[before:])

    wait_until(deploying_new, 300, 0.05, message=lambda: _journal_text(fake_stack)[-2000:])
    killer.stdin.write("kill\n")
    killer.stdin.flush()
    output, _ = killer.communicate(timeout=120)
    assert "killed" in output, output
    swap.communicate(timeout=600)
    assert swap.returncode != 0

    def converged() -> bool:
        return any(e.get("after_restart") for e in _journal(fake_stack)[before:])

    wait_until(converged, 600, 1, message=lambda: _journal_text(fake_stack)[-2000:])
    end = [e for e in _journal(fake_stack) if e.get("after_restart")][-1]
    status = fake_stack.status()
    models = {m["name"]: m for m in status["models"]}  # type: ignore[attr-defined]
    serving = status["aliases"]["default"]  # type: ignore[index]
    assert serving in (KIMI, MINIMAX), status
    assert models[serving]["state"] == "ready"
    assert _one_owner(models)
    wait_until(
        lambda: _default_answers(fake_stack, serving),
        300,
        1,
        message=f"`default` never answered from {serving}",
    )
    print(f"manager killed in deploying_new -> {end['outcome']}: {end['message']}")


def _one_owner(models: dict[str, dict[str, object]]) -> bool:
    """No two models both claim to be serving: only one of the pair is ready."""
    return sum(1 for name in (KIMI, MINIMAX) if models.get(name, {}).get("state") == "ready") == 1


def _default_answers(stack: RunningStack, expected: str) -> bool:
    try:
        return _default_model(stack) == expected
    except openai.OpenAIError:
        return False
