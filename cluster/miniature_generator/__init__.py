"""Miniature models: small random-weight Hugging Face models that real vLLM serves on a CPU.

Each miniature keeps what matters to placement and serving from a real model's config
(architecture class, attention kind and latent sizes, GQA ratio, MoE top-k, shared experts,
dense first layers) and shrinks the rest. Every difference is recorded in config.json under
`switchyard_miniature`. Heavy packages (torch, safetensors, tokenizers) are imported only
when a miniature is written.
"""

from cluster.miniature_generator.catalog import MINIATURES, recipe_for
from cluster.miniature_generator.corrupt import corrupt_weights
from cluster.miniature_generator.miniature_cache import (
    FORMAT_VERSION,
    cached_miniature_dir,
    ensure_miniature,
)
from cluster.miniature_generator.recipe import MINIATURE_RECORD_KEY, MiniatureRecipe
from cluster.miniature_generator.writer import write_miniature

__all__ = [
    "FORMAT_VERSION",
    "MINIATURES",
    "MINIATURE_RECORD_KEY",
    "MiniatureRecipe",
    "cached_miniature_dir",
    "corrupt_weights",
    "ensure_miniature",
    "recipe_for",
    "write_miniature",
]
