"""The miniature tokenizer: trained locally, deterministic, loadable by real transformers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from cluster.miniature_generator import MINIATURES
from cluster.miniature_generator.special_tokens import (
    BOS_TOKEN_ID,
    EOS_TOKEN_ID,
    IM_START_TOKEN,
    MODEL_VOCAB_SIZE,
    PAD_TOKEN_ID,
)
from cluster.miniature_generator.tokenizer import train_tokenizer_json


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def test_training_twice_gives_the_same_tokenizer() -> None:
    assert train_tokenizer_json() == train_tokenizer_json()


def test_the_vocabulary_fills_the_models_embedding_table_exactly() -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(train_tokenizer_json())
    assert tokenizer.get_vocab_size() == MODEL_VOCAB_SIZE
    for name in MINIATURES:
        assert MINIATURES[name].config(seed=0)["vocab_size"] >= tokenizer.get_vocab_size()


def test_special_tokens_have_the_ids_the_configs_name() -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(train_tokenizer_json())
    assert tokenizer.token_to_id("<|endoftext|>") == BOS_TOKEN_ID
    assert tokenizer.token_to_id("<|im_end|>") == EOS_TOKEN_ID
    assert tokenizer.token_to_id("<|pad|>") == PAD_TOKEN_ID


def test_any_text_round_trips_because_the_bpe_is_byte_level() -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(train_tokenizer_json())
    text = "Switchyard sorts wagons: ünïcode, 日本語, emoji 🚂, tabs\tand\nnewlines."
    assert tokenizer.decode(tokenizer.encode(text).ids) == text


@pytest.mark.parametrize("name", tuple(MINIATURES))
def test_real_transformers_loads_config_and_tokenizer_and_renders_the_chat_template(
    name: str, written_miniatures: dict[str, Path]
) -> None:
    from transformers import AutoConfig, AutoTokenizer

    assert os.environ["HF_HUB_OFFLINE"] == "1"
    model_dir = written_miniatures[name]
    config = AutoConfig.from_pretrained(model_dir)
    assert config.architectures == MINIATURES[name].config(seed=0)["architectures"]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id) == (
        BOS_TOKEN_ID,
        EOS_TOKEN_ID,
        PAD_TOKEN_ID,
    )
    messages: Any = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hello"}]},
    ]
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert prompt == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHello<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    ids = tokenizer(prompt)["input_ids"]
    assert ids[0] == tokenizer.convert_tokens_to_ids(IM_START_TOKEN)
    assert EOS_TOKEN_ID in ids
