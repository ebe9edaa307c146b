"""Trains the miniature's byte-level BPE tokenizer locally and writes the Hugging Face files."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cluster.miniature_generator.corpus import CORPUS
from cluster.miniature_generator.special_tokens import (
    BOS_TOKEN,
    CHAT_TEMPLATE,
    EOS_TOKEN,
    MODEL_VOCAB_SIZE,
    PAD_TOKEN,
    SPECIAL_TOKENS,
    ExtraToken,
)


def extra_token_ids(extra_tokens: Sequence[ExtraToken]) -> dict[int, ExtraToken]:
    """Where the model's extra tokens sit: the last rows of the embedding table, in order.

    They are added after training, so BOS 0 to PAD 3 keep their ids; the trainer's target
    shrinks by their count, so the total stays MODEL_VOCAB_SIZE and every row still decodes.
    """
    contents = [token.content for token in extra_tokens]
    if len(set(contents)) != len(contents) or set(contents) & set(SPECIAL_TOKENS):
        raise ValueError(f"extra tokens must be distinct and new: {contents}")
    first = MODEL_VOCAB_SIZE - len(extra_tokens)
    return {first + offset: token for offset, token in enumerate(extra_tokens)}


def train_tokenizer_json(extra_tokens: Sequence[ExtraToken] = ()) -> str:
    """The serialised tokenizer.json; the same text on every call (training is deterministic)."""
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )

    planned_ids = extra_token_ids(extra_tokens)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=MODEL_VOCAB_SIZE - len(planned_ids),
        # Every pair may merge, so the vocabulary fills the whole embedding table and every id
        # the random model samples decodes to text.
        min_frequency=1,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS.splitlines(keepends=True), trainer=trainer)
    for token in planned_ids.values():
        # Added tokens are matched in the raw text before byte-level splitting, so each tag
        # is one id; normalized=False is what tokenizer_config.json below declares too.
        tokenizer.add_tokens([AddedToken(token.content, special=token.special, normalized=False)])
    actual_ids = {tokenizer.token_to_id(token.content): token for token in planned_ids.values()}
    if actual_ids != planned_ids:
        raise AssertionError("the extra tokens did not land on the last embedding rows")
    if tokenizer.get_vocab_size() > MODEL_VOCAB_SIZE:
        raise AssertionError("the trained tokenizer outgrew the model's embedding table")
    text: str = tokenizer.to_str(pretty=True)
    return text


def _added_token(content: str, *, special: bool) -> dict[str, Any]:
    return {
        "content": content,
        "lstrip": False,
        "normalized": False,
        "rstrip": False,
        "single_word": False,
        "special": special,
    }


def tokenizer_config(
    model_max_length: int, extra_tokens: Sequence[ExtraToken] = ()
) -> dict[str, Any]:
    # transformers takes the flags from here as well as from tokenizer.json; both say the
    # same, so every loader strips (or keeps) a tag under skip_special_tokens the same way.
    added_tokens_decoder = {
        str(token_id): _added_token(token, special=True)
        for token_id, token in enumerate(SPECIAL_TOKENS)
    }
    added_tokens_decoder.update(
        (str(token_id), _added_token(token.content, special=token.special))
        for token_id, token in extra_token_ids(extra_tokens).items()
    )
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


def write_tokenizer(
    model_dir: Path, *, model_max_length: int, extra_tokens: Sequence[ExtraToken] = ()
) -> None:
    """The tokenizer files of one miniature; `extra_tokens` are its model's parser tags."""
    (model_dir / "tokenizer.json").write_text(train_tokenizer_json(extra_tokens), encoding="utf-8")
    write_json(
        model_dir / "tokenizer_config.json", tokenizer_config(model_max_length, extra_tokens)
    )
    write_json(model_dir / "special_tokens_map.json", special_tokens_map())


def write_json(path: Path, content: object) -> None:
    """Sorted keys and a fixed layout, so the same content is always the same bytes."""
    path.write_text(
        json.dumps(content, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
    )
