"""Random prompts whose token count, as the server will count it, is exactly what was asked.

`vllm bench serve`'s random dataset decodes random token ids and re-encodes them, which can
drift by a token or two. Here prompts are built from "words": vocabulary entries that are a
single token on their own and that the pre-tokenizer splits apart again when they are joined
(byte-level BPE splits before every " word"; SentencePiece before every space). Joined words
therefore encode to one token each; the count is still checked, and corrected, against the
real tokenizer before a prompt is returned, so a tokenizer that breaks the rule raises
instead of producing a wrong length.

The length is what `/v1/completions` counts: `tokenizer.encode(prompt)` with the special
tokens the tokenizer adds (a BOS for many models), i.e. the server's `usage.prompt_tokens`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

# Words of letters only: no digits or punctuation that pre-tokenizers split or merge.
_SPACED_WORD = re.compile(r" [A-Za-z]{2,}")
_BARE_WORD = re.compile(r"[A-Za-z]{2,}")
MIN_WORD_POOL = 16
"""Fewer distinct words than this would make prompts repeat and hit the prefix cache."""
MAX_WORD_POOL = 4096
"""Enough variety; stops the scan of a 150k-token vocabulary early."""
_MAX_FIX_ROUNDS = 8


class Tokenizer(Protocol):
    """The part of a Hugging Face tokenizer the generator uses."""

    @property
    def all_special_ids(self) -> list[int]: ...

    def __len__(self) -> int: ...

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]: ...

    def decode(self, token_ids: list[int], **kwargs: Any) -> str | list[str]: ...


@dataclass(frozen=True)
class Prompt:
    text: str
    token_count: int


@dataclass(frozen=True)
class WordPool:
    """Single-token words and how to join them so that each stays one token."""

    words: tuple[str, ...]
    separator: str
    """"" when every word carries its own leading space (byte-level BPE), else " "."""


def word_pool(tokenizer: Tokenizer, *, seed: int = 0) -> WordPool:
    """The words prompts are made of; raises ValueError when the vocabulary has too few."""
    special = set(tokenizer.all_special_ids)
    ids = [i for i in range(len(tokenizer)) if i not in special]
    # Scan in a seeded random order so a big vocabulary's pool is a sample of all of it.
    random.Random(seed).shuffle(ids)
    spaced: list[str] = []
    bare: list[str] = []
    for token_id in ids:
        piece = str(tokenizer.decode([token_id]))
        if _SPACED_WORD.fullmatch(piece) and len(spaced) < MAX_WORD_POOL:
            if tokenizer.encode(piece, add_special_tokens=False) == [token_id]:
                spaced.append(piece)
        elif (
            # SentencePiece decodes "▁word" alone without its space; it encodes back to
            # one token because the tokenizer adds the space-marker itself.
            _BARE_WORD.fullmatch(piece)
            and len(bare) < MAX_WORD_POOL
            and len(tokenizer.encode(piece, add_special_tokens=False)) == 1
        ):
            bare.append(piece)
        if len(spaced) >= MAX_WORD_POOL:
            break
    if len(spaced) >= MIN_WORD_POOL:
        return WordPool(tuple(spaced), "")
    if len(bare) >= MIN_WORD_POOL:
        return WordPool(tuple(bare), " ")
    raise ValueError(
        f"the tokenizer has only {max(len(spaced), len(bare))} single-token words; "
        f"exact-length prompts need at least {MIN_WORD_POOL}"
    )


def special_token_overhead(tokenizer: Tokenizer) -> int:
    """Tokens the tokenizer adds to every prompt (BOS, EOS ...)."""
    return len(tokenizer.encode("", add_special_tokens=True))


def exact_length_prompts(
    tokenizer: Tokenizer, *, count: int, input_len: int, seed: int = 0
) -> list[Prompt]:
    """`count` different random prompts, each exactly `input_len` tokens long as the server
    counts them. Raises ValueError when `input_len` cannot be reached."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    overhead = special_token_overhead(tokenizer)
    if input_len <= overhead:
        raise ValueError(
            f"input length {input_len} leaves no room for text: the tokenizer adds "
            f"{overhead} special tokens to every prompt; ask for at least {overhead + 1}"
        )
    pool = word_pool(tokenizer, seed=seed)
    rng = random.Random(seed)
    return [_one_prompt(tokenizer, pool, rng, input_len, overhead) for _ in range(count)]


def _one_prompt(
    tokenizer: Tokenizer, pool: WordPool, rng: random.Random, input_len: int, overhead: int
) -> Prompt:
    words = [rng.choice(pool.words) for _ in range(input_len - overhead)]
    for _ in range(_MAX_FIX_ROUNDS):
        text = pool.separator.join(words)
        counted = len(tokenizer.encode(text, add_special_tokens=True))
        if counted == input_len:
            return Prompt(text, counted)
        words = _adjusted(words, counted - input_len, pool.words, rng)
    raise ValueError(
        f"could not build a prompt of exactly {input_len} tokens with this tokenizer "
        f"(last try counted {counted})"
    )


def _adjusted(words: list[str], excess: int, pool: Sequence[str], rng: random.Random) -> list[str]:
    if excess > 0:
        return words[: max(1, len(words) - excess)]
    return words + [rng.choice(pool) for _ in range(-excess)]
