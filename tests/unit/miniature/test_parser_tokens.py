"""The tags vLLM's tool-call and reasoning parsers look up by id exist on the miniatures.

The tag lists are written out here rather than imported, so the test pins what vLLM's kimi_k2
and minimax_m2 parsers need, not whatever the recipes happen to declare.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cluster.miniature_generator import MINIATURE_RECORD_KEY, MINIATURES
from cluster.miniature_generator.special_tokens import (
    BOS_TOKEN,
    EOS_TOKEN,
    IM_START_TOKEN,
    MODEL_VOCAB_SIZE,
    PAD_TOKEN,
    ExtraToken,
)
from cluster.miniature_generator.tokenizer import extra_token_ids, train_tokenizer_json

KIMI_TAGS = (
    "<think>",
    "</think>",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_end|>",
    "<|tool_call_argument_begin|>",
)
MINIMAX_TAGS = ("<think>", "</think>", "<minimax:tool_call>", "</minimax:tool_call>")
PARSER_TAGS = {"kimi-k2.5": KIMI_TAGS, "minimax-m2.5": MINIMAX_TAGS}
# As the real tokenizers flag them: Kimi's tags are special, MiniMax's are plain added tokens.
REAL_SPECIAL = {"kimi-k2.5": True, "minimax-m2.5": False}
OLD_SPECIAL_IDS = {BOS_TOKEN: 0, IM_START_TOKEN: 1, EOS_TOKEN: 2, PAD_TOKEN: 3}


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def _tokenizer_json(model_dir: Path) -> dict[str, Any]:
    content: dict[str, Any] = json.loads((model_dir / "tokenizer.json").read_text())
    return content


@pytest.mark.parametrize("name", tuple(PARSER_TAGS))
def test_each_parser_tag_is_one_id_inside_the_embedding_table(
    name: str, written_miniatures: dict[str, Path]
) -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(written_miniatures[name] / "tokenizer.json"))
    assert tokenizer.get_vocab_size() == MODEL_VOCAB_SIZE
    ids = set()
    for tag in PARSER_TAGS[name]:
        token_id = tokenizer.token_to_id(tag)
        assert token_id is not None, tag
        assert 0 <= token_id < MODEL_VOCAB_SIZE, tag
        assert tokenizer.encode(tag, add_special_tokens=False).ids == [token_id], tag
        ids.add(token_id)
    assert len(ids) == len(PARSER_TAGS[name])


@pytest.mark.parametrize("name", tuple(MINIATURES))
def test_the_shared_special_tokens_keep_their_ids(
    name: str, written_miniatures: dict[str, Path]
) -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(written_miniatures[name] / "tokenizer.json"))
    for token, token_id in OLD_SPECIAL_IDS.items():
        assert tokenizer.token_to_id(token) == token_id, token
    config = json.loads((written_miniatures[name] / "config.json").read_text())
    assert (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"]) == (0, 2, 3)
    assert config["vocab_size"] == MODEL_VOCAB_SIZE


@pytest.mark.parametrize("name", tuple(PARSER_TAGS))
def test_both_tokenizer_files_flag_the_tags_as_the_real_tokenizer_does(
    name: str, written_miniatures: dict[str, Path]
) -> None:
    model_dir = written_miniatures[name]
    in_json = {t["content"]: t for t in _tokenizer_json(model_dir)["added_tokens"]}
    decoder = json.loads((model_dir / "tokenizer_config.json").read_text())["added_tokens_decoder"]
    in_config = {entry["content"]: (int(token_id), entry) for token_id, entry in decoder.items()}
    for tag in PARSER_TAGS[name]:
        token_id, entry = in_config[tag]
        assert token_id == in_json[tag]["id"], tag
        assert entry["special"] is in_json[tag]["special"] is REAL_SPECIAL[name], tag
        assert entry["normalized"] is in_json[tag]["normalized"] is False, tag


def test_kimi_tags_drop_out_of_skip_special_decoding_and_minimax_tags_stay(
    written_miniatures: dict[str, Path],
) -> None:
    from transformers import AutoTokenizer

    for name, tags in PARSER_TAGS.items():
        tokenizer = AutoTokenizer.from_pretrained(written_miniatures[name])
        text = "".join(f"{tag}x" for tag in tags)
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert all(tokenizer.get_vocab()[tag] in ids for tag in tags)
        # vLLM's parsers turn skip_special_tokens off, so both flavours reach them intact.
        assert tokenizer.decode(ids, skip_special_tokens=False) == text
        kept = tokenizer.decode(ids, skip_special_tokens=True)
        assert kept == ("x" * len(tags) if REAL_SPECIAL[name] else text), name


def test_llama_adds_no_tags_and_keeps_the_plain_trained_tokenizer(
    written_miniatures: dict[str, Path],
) -> None:
    assert MINIATURES["llama"].extra_tokens == ()
    written = (written_miniatures["llama"] / "tokenizer.json").read_text(encoding="utf-8")
    assert written == train_tokenizer_json()
    added = _tokenizer_json(written_miniatures["llama"])["added_tokens"]
    assert [t["content"] for t in added] == list(OLD_SPECIAL_IDS)


@pytest.mark.parametrize("name", tuple(PARSER_TAGS))
def test_the_recipe_declares_the_tags_and_the_record_names_them(name: str) -> None:
    recipe = MINIATURES[name]
    assert tuple(token.content for token in recipe.extra_tokens) == PARSER_TAGS[name]
    record = recipe.config(seed=0)[MINIATURE_RECORD_KEY]["deviations"]["tokenizer"]
    assert all(tag in record["miniature"] for tag in PARSER_TAGS[name])


def test_extra_tokens_take_the_last_rows_in_order() -> None:
    tokens = (ExtraToken("<a>", special=False), ExtraToken("<b>", special=True))
    assert extra_token_ids(tokens) == {
        MODEL_VOCAB_SIZE - 2: tokens[0],
        MODEL_VOCAB_SIZE - 1: tokens[1],
    }


@pytest.mark.parametrize(
    "tokens",
    [
        (ExtraToken("<a>", special=False), ExtraToken("<a>", special=True)),
        (ExtraToken(EOS_TOKEN, special=True),),
    ],
)
def test_repeated_or_already_special_extra_tokens_are_refused(
    tokens: tuple[ExtraToken, ...],
) -> None:
    with pytest.raises(ValueError, match="distinct and new"):
        extra_token_ids(tokens)
