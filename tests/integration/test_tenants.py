"""Tenants on a running stack: the fake stack starts with `up --keys` (the suite's key as
tenant `suite`), this module reloads a keys file with restricted tenants through
`switchyard keys reload FILE`, checks each rule through the endpoint (two gateway replicas
sharing one quota), the per-key metrics on the metrics agents Prometheus scrapes, `status`'s
top users, and that no key ever reaches logs, metrics or `status`; then `keys reload` without
FILE puts the stack's own file back (the state later modules see).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.running_stack import RunningStack
from tests.support.shared_stacks import API_KEY, SUITE_KEY_ENV
from tests.support.waiting import wait_until

ALICE_KEY, BOB_KEY = "sk-tenant-alice-7f3a", "sk-tenant-bob-91c2"
EXCHANGED_S = 2.3
"""Longer than two exchange periods (1 s each): a count made on one gateway replica has
been sent to the registry and fetched by the other."""
ENV = {SUITE_KEY_ENV: API_KEY, "ALICE_KEY": ALICE_KEY, "BOB_KEY": BOB_KEY}


@pytest.fixture(scope="module")
def stack(
    fake_stack: RunningStack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    path = tmp_path_factory.mktemp("tenants") / "tenants.yaml"
    path.write_text(
        "keys:\n"
        f"  - {{name: suite, key_env: {SUITE_KEY_ENV}}}\n"
        "  - {name: alice, key_env: ALICE_KEY, models: [small], requests_per_minute: 3}\n"
        "  - {name: bob, key_env: BOB_KEY, tokens_per_minute: 40}\n"
    )
    reload = _keys(fake_stack, "reload", str(path))
    assert reload.returncode == 0, reload.stderr
    assert "alice" in reload.stdout and ALICE_KEY not in reload.stdout
    wait_until(lambda: _every_replica_answers(fake_stack, ALICE_KEY, 200), 10)
    yield fake_stack
    back = _keys(fake_stack, "reload")  # the file `up --keys` named
    assert back.returncode == 0, back.stderr
    wait_until(lambda: _every_replica_answers(fake_stack, ALICE_KEY, 401), 10)


def _every_replica_answers(stack: RunningStack, key: str, status: int) -> bool:
    """Whether both gateway replicas know the table: a listing (it counts against no quota)
    on new connections, which SO_REUSEPORT spreads over the replicas, answers `status` each
    time."""
    for _ in range(8):
        listed = httpx.get(
            f"{stack.base_url}/models", headers={"Authorization": f"Bearer {key}"}, timeout=30
        )
        if listed.status_code != status:
            return False
    return True


def _keys(stack: RunningStack, *args: str) -> subprocess.CompletedProcess[str]:
    return stack.cli("keys", *args, timeout_s=120, env=ENV)


def _chat(stack: RunningStack, key: str, model: str, max_tokens: int = 4) -> httpx.Response:
    # A new connection each time: SO_REUSEPORT spreads them over both gateway replicas.
    return httpx.post(
        f"{stack.base_url}/chat/completions",
        json={
            "model": model,
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": max_tokens,
        },
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )


def test_a_key_uses_its_alias_and_nothing_else(stack: RunningStack) -> None:
    assert _chat(stack, ALICE_KEY, "small").status_code in (200, 429)
    refused = _chat(stack, ALICE_KEY, "default")
    assert refused.status_code == 404
    assert refused.json()["error"]["code"] == "model_not_found"
    listed = httpx.get(f"{stack.base_url}/models", headers={"Authorization": f"Bearer {ALICE_KEY}"})
    assert [m["id"] for m in listed.json()["data"]] == ["small"]


def test_requests_per_minute_hold_across_both_gateway_replicas(stack: RunningStack) -> None:
    statuses = []
    for _ in range(5):
        statuses.append(_chat(stack, ALICE_KEY, "small"))
        time.sleep(EXCHANGED_S)
    codes = [r.status_code for r in statuses]
    # The module's first test may have used one of the three already.
    assert codes.count(200) <= 3 and codes[-1] == 429, codes
    refused = statuses[-1]
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"
    assert int(refused.headers["retry-after"]) >= 1


def test_tokens_per_minute_count_the_engines_usage(stack: RunningStack) -> None:
    first = _chat(stack, BOB_KEY, "small", max_tokens=40)
    assert first.status_code == 200 and first.json()["usage"]["total_tokens"] >= 40
    time.sleep(EXCHANGED_S)
    second = _chat(stack, BOB_KEY, "small")
    assert second.status_code == 429 and "tokens" in second.json()["error"]["message"]


def test_per_key_metrics_name_the_tenant(stack: RunningStack) -> None:
    def exported() -> bool:
        text = stack.metrics_text()
        return (
            "ray_switchyard_key_requests_total{" in text
            and 'key="alice"' in text
            and 'reason="requests_per_minute"' in text
            and "ray_switchyard_key_generated_tokens_total" in text
        )

    wait_until(exported, 30, message="per-key series never reached the metrics agents")


def test_status_shows_the_top_users(stack: RunningStack) -> None:
    tenants = stack.status()["tenants"]
    assert isinstance(tenants, dict)
    assert tenants["keys"] == 3 and tenants["source"].endswith("tenants.yaml")
    top = {u["name"]: u for u in tenants["top"]}
    assert top["alice"]["requests"] >= 3 and top["alice"]["rejections"] >= 1
    assert top["bob"]["tokens"] >= 40


def test_a_bad_reload_changes_nothing(stack: RunningStack, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("keys:\n  - {name: eve, key_env: EVE_KEY_UNSET}\n")
    result = _keys(stack, "reload", str(bad))
    assert result.returncode == 2 and "(eve).key_env" in result.stderr
    assert _chat(stack, BOB_KEY, "small").status_code != 401


def test_no_key_reaches_logs_metrics_or_status(stack: RunningStack) -> None:
    status = json.dumps(stack.status())
    metrics = stack.metrics_text()
    logs = ""
    session = stack.session_dir()
    assert session is not None
    for path in Path(session, "logs").rglob("*"):
        if path.is_file() and path.stat().st_size < 50_000_000:
            logs += path.read_text(errors="replace")
    for key in (ALICE_KEY, BOB_KEY, API_KEY):
        assert key not in status and key not in metrics
        assert key not in logs, "a key is in the session's logs"


def test_a_fleet_files_gateway_keys_are_published_by_apply(
    stack: RunningStack, tmp_path: Path
) -> None:
    export = stack.cli("export", timeout_s=120)
    assert export.returncode == 0, export.stderr
    exported = export.stdout
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        exported
        + "gateway:\n  keys:\n"
        + f"    - {{name: suite, key_env: {SUITE_KEY_ENV}}}\n"
        + "    - {name: dora, key_env: ALICE_KEY, models: [default]}\n"
    )
    applied = stack.cli("apply", "-f", str(fleet), timeout_s=300, env=ENV)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    # ALICE_KEY is now dora's: `default` only, no quota (alice's limit is gone with her).
    # Each of the two gateway replicas takes the new keys on its own refresh, so one may
    # still answer as alice (429) right after the other answers as dora: wait for both.
    wait_until(
        lambda: (
            [_chat(stack, ALICE_KEY, m).status_code for m in ("default", "small") * 2]
            == [200, 404] * 2
        ),
        10,
    )
