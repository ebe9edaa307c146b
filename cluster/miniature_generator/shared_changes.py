"""Config changes every miniature makes the same way, with the same reasons."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from cluster.miniature_generator.recipe import ConfigChange, Deviation
from cluster.miniature_generator.special_tokens import (
    BOS_TOKEN_ID,
    EOS_TOKEN_ID,
    MODEL_VOCAB_SIZE,
    PAD_TOKEN_ID,
    ExtraToken,
)

MINIATURE_MAX_POSITIONS: Final = 4096
"""Small enough that vLLM's CPU KV cache (VLLM_CPU_KVCACHE_SPACE, GiB) holds a full sequence."""

SHRUNK = "shrunk so a 2-core CPU loads the miniature in seconds and the weights stay a few MB"

_TOKENIZER_WHY = "the miniature's tokenizer is a small byte-level BPE trained at generation time"


def vocabulary_changes() -> tuple[ConfigChange, ...]:
    return (
        ConfigChange("vocab_size", MODEL_VOCAB_SIZE, _TOKENIZER_WHY),
        ConfigChange("bos_token_id", BOS_TOKEN_ID, _TOKENIZER_WHY),
        ConfigChange("eos_token_id", EOS_TOKEN_ID, _TOKENIZER_WHY),
        ConfigChange("pad_token_id", PAD_TOKEN_ID, _TOKENIZER_WHY),
    )


def context_change() -> ConfigChange:
    return ConfigChange(
        "max_position_embeddings",
        MINIATURE_MAX_POSITIONS,
        "a CPU KV cache of about 1 GiB must hold a full-length sequence",
    )


def tokenizer_deviation(real: str, extra_tokens: Sequence[ExtraToken] = ()) -> Deviation:
    miniature = "byte-level BPE trained locally on a built-in corpus, ChatML chat template"
    if extra_tokens:
        # Named in the record so a reader sees which real tags the miniature kept, and why.
        tags = ", ".join(token.content for token in extra_tokens)
        miniature += f"; the real tokenizer's parser tags kept as single tokens: {tags}"
    return Deviation(
        "tokenizer",
        real,
        miniature,
        "generation must not touch the network, and a full vocabulary would dwarf the weights",
    )
