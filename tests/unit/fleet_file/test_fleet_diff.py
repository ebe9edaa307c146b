"""`diff_fleet`: the steps from the live fleet to a file, in apply's order (removes, swaps,
adds, alias moves), each listed once."""

from __future__ import annotations

import pytest

from domain.fleet_file import FleetModelEntry, parse_fleet_file
from domain.fleet_file_diff import ChangeAction, diff_fleet

pytestmark = pytest.mark.unit

LIVE_FILE = """
models:
  - {name: kimi, source: 'miniature:kimi-k2.5', aliases: [default], layout: {tp: 1}}
  - {name: llama, source: 'miniature:llama', aliases: [small], layout: {tp: 1},
     engine: {max_model_len: 256}}
"""


def _live() -> tuple[dict[str, FleetModelEntry], dict[str, str]]:
    fleet = parse_fleet_file(LIVE_FILE, "live")
    return {m.name: m for m in fleet.models}, fleet.alias_targets()


def _steps(text: str) -> list[tuple[str, str, str | None, str | None]]:
    live, aliases = _live()
    diff = diff_fleet(live, aliases, parse_fleet_file(text, "new"))
    return [(c.action.value, c.model, c.replaces, c.alias) for c in diff.changes]


def test_the_same_fleet_has_no_changes() -> None:
    assert _steps(LIVE_FILE) == []


def test_a_model_whose_aliases_all_go_to_a_new_one_is_swapped_for_it() -> None:
    text = LIVE_FILE.replace(
        "{name: kimi, source: 'miniature:kimi-k2.5', aliases: [default], layout: {tp: 1}}",
        "{name: minimax, source: 'miniature:minimax-m2.5', aliases: [default]}",
    )
    assert _steps(text) == [("swap", "minimax", "kimi", None)]


def test_the_same_name_with_new_engine_settings_is_a_swap_of_itself() -> None:
    text = LIVE_FILE.replace("max_model_len: 256", "max_model_len: 512")
    live, aliases = _live()
    (change,) = diff_fleet(live, aliases, parse_fleet_file(text, "new")).changes
    assert (change.action, change.model, change.replaces) == (ChangeAction.SWAP, "llama", "llama")
    assert change.changed == ("engine",)


def test_an_alias_that_moves_is_listed_once_and_last() -> None:
    text = """
models:
  - {name: kimi, source: 'miniature:kimi-k2.5', aliases: [default, small], layout: {tp: 1}}
  - {name: llama, source: 'miniature:llama', layout: {tp: 1}, engine: {max_model_len: 512}}
  - {name: extra, source: 'miniature:minimax-m2.5'}
"""
    assert _steps(text) == [
        ("swap", "llama", "llama", None),
        ("add", "extra", None, None),
        ("alias", "kimi", None, "small"),
    ]


def test_a_model_missing_from_the_file_with_no_heir_is_removed_first() -> None:
    text = """
models:
  - {name: kimi, source: 'miniature:kimi-k2.5', aliases: [default], layout: {tp: 1}}
  - {name: minimax, source: 'miniature:minimax-m2.5'}
"""
    live, aliases = _live()
    diff = diff_fleet(live, aliases, parse_fleet_file(text, "new"))
    assert [(c.action.value, c.model) for c in diff.changes] == [
        ("remove", "llama"),
        ("add", "minimax"),
    ]
    assert diff.left_aliases == ()


def test_an_alias_the_file_drops_is_left_and_reported() -> None:
    text = LIVE_FILE.replace("aliases: [small], ", "")
    live, aliases = _live()
    diff = diff_fleet(live, aliases, parse_fleet_file(text, "new"))
    assert diff.changes == () and diff.left_aliases == ("small",)


def test_a_residency_change_alone_is_its_own_step_and_no_redeploy() -> None:
    text = LIVE_FILE.replace(
        "engine: {max_model_len: 256}}",
        "engine: {max_model_len: 256}, residency: on_demand, park_after_idle_s: 120}",
    )
    live, aliases = _live()
    (change,) = diff_fleet(live, aliases, parse_fleet_file(text, "new")).changes
    assert (change.action, change.model) == (ChangeAction.RESIDENCY, "llama")
    assert change.changed == ("residency", "park_after_idle_s")


def test_a_residency_change_with_new_engine_settings_rides_on_the_swap() -> None:
    text = LIVE_FILE.replace(
        "engine: {max_model_len: 256}}", "engine: {max_model_len: 512}, residency: on_demand}"
    )
    live, aliases = _live()
    (change,) = diff_fleet(live, aliases, parse_fleet_file(text, "new")).changes
    assert change.action is ChangeAction.SWAP and change.entry is not None
    assert change.entry.residency.value == "on_demand"


def test_moving_to_sleep_mode_restarts_the_engine_and_a_new_sleep_level_does_not() -> None:
    # The engine starts with sleep mode enabled: park_mode sleep is a same-name swap.
    to_sleep = LIVE_FILE.replace(
        "engine: {max_model_len: 256}}", "engine: {max_model_len: 256}, park_mode: sleep}"
    )
    live, aliases = _live()
    (change,) = diff_fleet(live, aliases, parse_fleet_file(to_sleep, "new")).changes
    assert (change.action, change.model, change.changed) == (
        ChangeAction.SWAP,
        "llama",
        ("park_mode",),
    )
    (llama,) = [m for m in parse_fleet_file(to_sleep, "live").models if m.name == "llama"]
    asleep = {**live, "llama": llama}
    deeper = to_sleep.replace("park_mode: sleep}", "park_mode: sleep, sleep_level: 2}")
    (change,) = diff_fleet(asleep, aliases, parse_fleet_file(deeper, "new")).changes
    assert (change.action, change.changed) == (ChangeAction.RESIDENCY, ("sleep_level",))
