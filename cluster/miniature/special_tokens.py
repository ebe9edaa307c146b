"""The special tokens every miniature tokenizer shares, and the chat template that uses them.

The BPE trainer puts special tokens first, in this order, so their ids are fixed and the
model configs can name them without training a tokenizer first.
"""

from __future__ import annotations

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
