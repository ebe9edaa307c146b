"""Trains the miniature's byte-level BPE tokenizer locally and writes the Hugging Face files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cluster.miniature.corpus import CORPUS
from cluster.miniature.special_tokens import (
    BOS_TOKEN,
    CHAT_TEMPLATE,
    EOS_TOKEN,
    MODEL_VOCAB_SIZE,
    PAD_TOKEN,
    SPECIAL_TOKENS,
)


def train_tokenizer_json() -> str:
    """The serialised tokenizer.json; the same text on every call (training is deterministic)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=MODEL_VOCAB_SIZE,
        # Every pair may merge, so the vocabulary fills the whole embedding table and every id
        # the random model samples decodes to text.
        min_frequency=1,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS.splitlines(keepends=True), trainer=trainer)
    if tokenizer.get_vocab_size() > MODEL_VOCAB_SIZE:
        raise AssertionError("the trained tokenizer outgrew the model's embedding table")
    text: str = tokenizer.to_str(pretty=True)
    return text


def tokenizer_config(model_max_length: int) -> dict[str, Any]:
    added_tokens_decoder = {
        str(token_id): {
            "content": token,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for token_id, token in enumerate(SPECIAL_TOKENS)
    }
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS_TOKEN,
        "eos_token": EOS_TOKEN,
        "pad_token": PAD_TOKEN,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": model_max_length,
        "added_tokens_decoder": added_tokens_decoder,
        "chat_template": CHAT_TEMPLATE,
    }


def special_tokens_map() -> dict[str, str]:
    return {"bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN, "pad_token": PAD_TOKEN}


def write_tokenizer(model_dir: Path, *, model_max_length: int) -> None:
    (model_dir / "tokenizer.json").write_text(train_tokenizer_json(), encoding="utf-8")
    write_json(model_dir / "tokenizer_config.json", tokenizer_config(model_max_length))
    write_json(model_dir / "special_tokens_map.json", special_tokens_map())


def write_json(path: Path, content: object) -> None:
    """Sorted keys and a fixed layout, so the same content is always the same bytes."""
    path.write_text(
        json.dumps(content, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
    )
