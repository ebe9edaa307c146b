"""The fleet file: what it accepts, and how a bad one is refused (one line, exit 2).

A model's entry is kept as written (which fields were set), through the manager's
fleet.json, so `diff` compares what the operator wrote and `export` gives it back.
"""

from __future__ import annotations

import pytest

from domain.deployment_config import LayoutConfig
from domain.exit_codes import UserInputError
from domain.fleet_file import FleetModelEntry, fleet_file_text, parse_fleet_file
from domain.fleet_state import FleetState

pytestmark = pytest.mark.unit

GOOD = """
models:
  - name: kimi
    source: miniature:kimi-k2.5
    aliases: [default]
    layout: {tp: 2}
    engine:
      max_model_len: 512
      max_num_seqs: 8
      extra: {block_size: 32}
  - name: minimax
    source: miniature:minimax-m2.5
    objective: latency
"""


def _refusal(text: str) -> str:
    with pytest.raises(UserInputError) as caught:
        parse_fleet_file(text, "fleet.yaml")
    message = str(caught.value)
    assert "\n" not in message, "one line"
    assert message.startswith("fleet.yaml: ")
    return message


def test_a_good_file_gives_each_model_as_written() -> None:
    fleet = parse_fleet_file(GOOD, "fleet.yaml")
    kimi, minimax = fleet.models
    assert kimi.layout != "auto" and kimi.deployment().layout == LayoutConfig(tp=2)
    assert kimi.engine.max_num_seqs == 8 and kimi.engine.extra == {"block_size": 32}
    assert minimax.auto_layout and minimax.objective == "latency" and minimax.replicas == 1
    assert kimi.written() == {
        "name": "kimi",
        "source": "miniature:kimi-k2.5",
        "aliases": ["default"],
        "layout": {"tp": 2},
        "engine": {"max_model_len": 512, "max_num_seqs": 8, "extra": {"block_size": 32}},
    }
    assert parse_fleet_file(fleet_file_text(fleet.models), "again.yaml") == fleet


def test_a_deployment_carries_only_the_engine_fields_the_file_set() -> None:
    config = parse_fleet_file(GOOD, "f").models[0].deployment()
    assert config.engine.model_fields_set == {"max_model_len", "max_num_seqs", "extra"}
    assert config.aliases == ("default",)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "models: [{name: a, source: 'miniature:llama', engine: {max_num_seq: 3}}]",
            "model 'a' (models[0]): engine: engine.max_num_seq is not an engine field; put "
            "any other vLLM argument under engine.extra",
        ),
        (
            "models: [{name: a, source: 'miniature:llama', engine: {max_num_seqs: many}}]",
            "model 'a' (models[0]): engine.max_num_seqs: 'many' is not allowed",
        ),
        (
            "models: [{name: a, source: 'miniature:llama', layout: {tp: 0}}]",
            "model 'a' (models[0]): layout.tp: 0 is not allowed",
        ),
        (
            "models: [{name: a, source: 'miniature:llama', layout: {tp: 2, dcp: 4}}]",
            "dcp=4: decode context parallel shards within the TP group",
        ),
        (
            "models: [{name: a, source: 'miniature:llama'}, {name: a, source: 'miniature:llama'}]",
            "models[1].name: the name 'a' is already used by models[0]",
        ),
        (
            "models: [{name: a, source: 'miniature:llama', aliases: [b]},"
            " {name: b, source: 'miniature:llama'}]",
            "models[0] (a).aliases: 'b' is the name of a model",
        ),
        (
            "models: [{name: a, source: 'miniature:llama', engine: "
            "{extra: {tensor_parallel_size: 2}}}]",
            "engine.extra sets ['tensor_parallel_size'], which is not allowed",
        ),
        (
            "models: [{name: a, source: 'miniature:llama', engine: {extra: {port: 9}}}]",
            "Switchyard's gateway owns it",
        ),
        (
            "models: [{name: a, source: 'miniature:llama', engine: {extra: {max_num_seqs: 9}}}]",
            "engine.extra.max_num_seqs is an engine field: set engine.max_num_seqs instead",
        ),
        ("models: [{name: a, source: 'miniature:llama', gpus: 1}]", "gpus: 1 is not allowed"),
        ("models: [{name: a, source: 'miniature:llama', accelerator: gpu}]", "accelerator"),
        ("gateway: {keys: [{name: a}]}", "gateway.keys.0: give exactly one of key_env"),
        ("gateway: {tenants: []}", "gateway.tenants"),
        ("- a list", "the top level must be a mapping"),
        ("models: [{name: 'bad name', source: 'miniature:llama'}]", "name: 'bad name'"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_model_field_and_value(text: str, expected: str) -> None:
    assert expected in _refusal(text)


def test_an_entry_keeps_what_was_set_through_the_fleet_snapshot() -> None:
    entry = parse_fleet_file(GOOD, "f").models[1]
    state = FleetState().with_model(entry.deployment(), 1, entry)
    reloaded = FleetState.model_validate_json(state.model_dump_json())
    stored = reloaded.models["minimax"].entry
    assert stored == entry and stored is not None
    assert stored.deployed_form() == entry.deployed_form()
    assert stored.written() == {
        "name": "minimax",
        "source": "miniature:minimax-m2.5",
        "objective": "latency",
    }


def test_a_model_added_by_flags_reads_as_an_explicit_layout() -> None:
    config = parse_fleet_file(GOOD, "f").models[0].deployment()
    entry = FleetModelEntry.of_config(config)
    assert entry.written()["layout"] == {"tp": 2}
    assert entry.deployed_form() == parse_fleet_file(GOOD, "f").models[0].deployed_form()
