"""`add`/`swap --engine-arg KEY=VALUE`: typed engine fields by name, any other vLLM argument
under `extra`, VALUE read as YAML; a bad one is a one-line input error (exit 2)."""

from __future__ import annotations

import pytest

from domain.exit_codes import UserInputError
from switchyard.cli import build_parser
from switchyard.commands.add import engine_settings, model_config

pytestmark = pytest.mark.unit


def test_typed_fields_and_other_arguments_go_where_the_file_puts_them() -> None:
    engine = engine_settings(
        [
            "max_num_seqs=64",
            "enable_prefix_caching=false",
            "tool_call_parser=kimi_k2",
            "speculative_config={method: mtp, num_speculative_tokens: 1}",
            "block_size=32",
        ]
    )
    assert engine == {
        "max_num_seqs": 64,
        "enable_prefix_caching": False,
        "tool_call_parser": "kimi_k2",
        "speculative_config": {"method": "mtp", "num_speculative_tokens": 1},
        "extra": {"block_size": 32},
    }


def test_the_flags_build_a_validated_config() -> None:
    args = build_parser().parse_args(
        ["add", "miniature:kimi-k2.5", "--name", "k", "--engine-arg", "max_num_seqs=8"]
    )
    assert model_config(args).engine.max_num_seqs == 8


@pytest.mark.parametrize(
    ("items", "says"),
    [
        (["max_num_seqs"], "use KEY=VALUE"),
        (["max-num-seqs=3"], "names use underscores (max_num_seqs)"),
        (["max_num_seqs=1", "max_num_seqs=2"], "given twice"),
        (["extra=3"], "not allowed"),
        (["block_size={a"], "not a YAML scalar"),
    ],
)
def test_a_bad_engine_arg_is_refused(items: list[str], says: str) -> None:
    with pytest.raises(UserInputError) as caught:
        engine_settings(items)
    assert says in str(caught.value)


def test_a_bad_value_of_a_typed_field_names_it() -> None:
    args = build_parser().parse_args(
        ["add", "miniature:kimi-k2.5", "--name", "k", "--engine-arg", "max_num_seqs=many"]
    )
    with pytest.raises(UserInputError) as caught:
        model_config(args)
    assert "engine.max_num_seqs: 'many' is not allowed" in str(caught.value)


def test_an_unknown_parser_is_refused_before_anything_is_sent() -> None:
    args = build_parser().parse_args(
        ["add", "miniature:kimi-k2.5", "--name", "k", "--engine-arg", "tool_call_parser=kimi"]
    )
    with pytest.raises(UserInputError) as caught:
        model_config(args)
    assert "engine.tool_call_parser: 'kimi' is not allowed" in str(caught.value)
    assert "kimi_k2" in str(caught.value)
