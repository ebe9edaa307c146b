"""The special tokens every miniature tokenizer shares, and the chat template that uses them.

The BPE trainer puts special tokens first, in this order, so their ids are fixed and the
model configs can name them without training a tokenizer first. A model's own tags (see
`ExtraToken`) come last, after the trained vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

BOS_TOKEN: Final = "<|endoftext|>"
IM_START_TOKEN: Final = "<|im_start|>"
EOS_TOKEN: Final = "<|im_end|>"
PAD_TOKEN: Final = "<|pad|>"

SPECIAL_TOKENS: Final = (BOS_TOKEN, IM_START_TOKEN, EOS_TOKEN, PAD_TOKEN)
BOS_TOKEN_ID: Final = 0
EOS_TOKEN_ID: Final = 2
PAD_TOKEN_ID: Final = 3

MODEL_VOCAB_SIZE: Final = 1024
"""The embedding rows of every miniature; the trained tokenizer may use fewer, never more."""

THINK_START: Final = "<think>"
THINK_END: Final = "</think>"
"""Reasoning tags that both Kimi-K2.5 and MiniMax-M2.5 emit, spelled as their tokenizers do."""


@dataclass(frozen=True)
class ExtraToken:
    """A tag of the real tokenizer that vLLM's tool-call or reasoning parsers look up by id.

    It is added after training as one token, so `get_vocab()[content]` exists and encoding
    `content` gives that single id. `special` copies the real tokenizer's flag: special tokens
    are dropped when vLLM detokenizes with skip_special_tokens=True (its default).
    """

    content: str
    special: bool


# ChatML, as Qwen and many others use it. Content may arrive as a string or as OpenAI-style
# parts (vLLM passes either, depending on the request), so both are rendered.
CHAT_TEMPLATE: Final = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}"
    "{{- message['content'] -}}"
    "{%- else -%}"
    "{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
