"""Model sources: the text users write, parsed once into a typed record."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.exit_codes import UserInputError
from domain.model_source import ModelSource, SourceKind, parse_model_source


def test_a_hub_repo_id_without_revision_means_the_default_branch():
    source = parse_model_source("moonshotai/Kimi-K2.5")
    assert source == ModelSource(kind=SourceKind.HUB, repo_id="moonshotai/Kimi-K2.5")
    assert source.revision is None


def test_a_hub_repo_id_may_name_a_branch_tag_or_commit_after_an_at_sign():
    assert parse_model_source("MiniMaxAI/MiniMax-M2.5@v1.0").revision == "v1.0"
    assert parse_model_source("org/name@refs/pr/3").revision == "refs/pr/3"
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert parse_model_source(f"org/name@{commit}").revision == commit


@pytest.mark.parametrize("text", ["/models/kimi", "./kimi", "../kimi", "~/kimi", "local:kimi"])
def test_paths_and_local_prefix_are_local_directories_made_absolute(text):
    source = parse_model_source(text)
    assert source.kind is SourceKind.LOCAL
    assert source.path is not None and source.path.is_absolute()


def test_a_miniature_source_names_the_miniature():
    assert parse_model_source("miniature:kimi-k25-mini") == ModelSource.miniature("kimi-k25-mini")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "gpt2",
        "a/b/c",
        "org/na me",
        "org/name@",
        "org/name@bad rev",
        "org--x/name",
        "org/..name",
        "-org/name",
        "miniature:",
        "miniature:../x",
        "local:",
        "org/" + "x" * 100,
    ],
)
def test_bad_text_is_a_one_line_user_input_error(text):
    with pytest.raises(UserInputError) as caught:
        parse_model_source(text)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("model source:")


def test_the_canonical_text_parses_back_to_the_same_source(tmp_path: Path):
    for source in (
        ModelSource.hub("org/name"),
        ModelSource.hub("org/name", "main"),
        ModelSource.local(tmp_path),
        ModelSource.miniature("mini"),
    ):
        assert parse_model_source(str(source)) == source


def test_a_source_with_fields_of_another_kind_cannot_be_built(tmp_path: Path):
    with pytest.raises(ValueError):
        ModelSource(kind=SourceKind.HUB, path=tmp_path)
    with pytest.raises(ValueError):
        ModelSource(kind=SourceKind.LOCAL, path=tmp_path, revision="main")


_part = st.from_regex(r"[A-Za-z0-9](?:[A-Za-z0-9_]{0,10}[A-Za-z0-9_])?", fullmatch=True)


@given(
    org=_part, name=_part, revision=st.none() | st.from_regex(r"[A-Za-z0-9_]{1,12}", fullmatch=True)
)
def test_every_valid_repo_id_round_trips(org, name, revision):
    source = ModelSource.hub(f"{org}/{name}", revision)
    assert parse_model_source(str(source)) == source
