"""Prompts have exactly the asked token count, as the served model's tokenizer counts it."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.miniature_generator import MINIATURES
from switchyard.bench.prompts import exact_length_prompts, special_token_overhead, word_pool


@pytest.mark.parametrize("name", MINIATURES)
@pytest.mark.parametrize("input_len", [1, 2, 16, 128, 1000])
def test_every_prompt_has_exactly_the_asked_token_count(
    miniature_tokenizers: dict[str, Any], name: str, input_len: int
) -> None:
    tokenizer = miniature_tokenizers[name]
    prompts = exact_length_prompts(tokenizer, count=20, input_len=input_len, seed=3)
    assert len(prompts) == 20
    for prompt in prompts:
        assert prompt.token_count == input_len
        assert len(tokenizer.encode(prompt.text)) == input_len


@pytest.mark.parametrize("name", MINIATURES)
def test_prompts_differ_so_the_prefix_cache_cannot_shortcut_them(
    miniature_tokenizers: dict[str, Any], name: str
) -> None:
    prompts = exact_length_prompts(miniature_tokenizers[name], count=50, input_len=16)
    assert len({p.text for p in prompts}) == 50
    assert len({p.text.split()[0] for p in prompts}) > 10


def test_the_same_seed_gives_the_same_prompts(miniature_tokenizers: dict[str, Any]) -> None:
    tokenizer = miniature_tokenizers["llama"]
    first = exact_length_prompts(tokenizer, count=5, input_len=32, seed=7)
    assert exact_length_prompts(tokenizer, count=5, input_len=32, seed=7) == first
    assert exact_length_prompts(tokenizer, count=5, input_len=32, seed=8) != first


def test_words_are_letters_that_stay_single_tokens(miniature_tokenizers: dict[str, Any]) -> None:
    tokenizer = miniature_tokenizers["minimax-m2.5"]
    pool = word_pool(tokenizer)
    assert len(pool.words) >= 16
    for word in pool.words:
        assert word.strip().isalpha()
        assert len(tokenizer.encode(word, add_special_tokens=False)) == 1


class _AddsBos:
    """The miniature's tokenizer as a model that prepends BOS to every prompt would have it
    (a fake only in that one respect, to test the special-token budget)."""

    def __init__(self, real: Any) -> None:
        self._real = real

    @property
    def all_special_ids(self) -> list[int]:
        ids: list[int] = self._real.all_special_ids
        return ids

    def __len__(self) -> int:
        return len(self._real)

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        ids: list[int] = self._real.encode(text, add_special_tokens=False)
        return [0, *ids] if add_special_tokens else ids

    def decode(self, token_ids: list[int], **kwargs: Any) -> str:
        text: str = self._real.decode(token_ids, **kwargs)
        return text


def test_special_tokens_the_tokenizer_adds_count_toward_the_length(
    miniature_tokenizers: dict[str, Any],
) -> None:
    tokenizer = _AddsBos(miniature_tokenizers["kimi-k2.5"])
    assert special_token_overhead(tokenizer) == 1
    for prompt in exact_length_prompts(tokenizer, count=5, input_len=10):
        assert len(tokenizer.encode(prompt.text)) == 10
        assert len(tokenizer.encode(prompt.text, add_special_tokens=False)) == 9


def test_a_length_with_no_room_for_text_is_refused(miniature_tokenizers: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="at least 2"):
        exact_length_prompts(_AddsBos(miniature_tokenizers["llama"]), count=1, input_len=1)
