"""Writes a miniature model directory atomically: built in a hidden sibling, then renamed.

A crash leaves at most a hidden `.NAME.partial-*` folder, never a half model under NAME.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from cluster.miniature_generator.catalog import check_seed, recipe_for
from cluster.miniature_generator.random_weights import write_weights
from cluster.miniature_generator.recipe import MiniatureRecipe
from cluster.miniature_generator.special_tokens import (
    BOS_TOKEN_ID,
    EOS_TOKEN_ID,
    PAD_TOKEN_ID,
)
from cluster.miniature_generator.tokenizer import write_json, write_tokenizer

CONFIG_FILE = "config.json"
GENERATION_CONFIG_FILE = "generation_config.json"


def partial_prefix(out_dir: Path) -> str:
    """Names of the staging folders a write to `out_dir` creates beside it."""
    return f".{out_dir.name}.partial-"


def write_miniature(name: str, out_dir: Path, *, seed: int = 0) -> Path:
    """Write miniature `name` as a complete Hugging Face model directory at `out_dir`.

    The same name and seed give the same bytes. `out_dir` may be missing or an empty
    directory; anything else raises FileExistsError and nothing is written.
    Returns the absolute path of the model directory.
    """
    recipe = recipe_for(name)
    check_seed(seed)
    out_dir = Path(out_dir).absolute()
    refuse_occupied(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=partial_prefix(out_dir), dir=out_dir.parent))
    try:
        os.chmod(staging, 0o755)  # mkdtemp makes it private; a model dir is shared read-only
        write_model_files(recipe, staging, seed=seed)
        _publish(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir


def refuse_occupied(out_dir: Path) -> None:
    if out_dir.is_dir() and any(out_dir.iterdir()):
        raise FileExistsError(f"{out_dir} exists and is not empty")
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"{out_dir} exists and is not a directory")


def write_model_files(recipe: MiniatureRecipe, model_dir: Path, *, seed: int) -> None:
    config = recipe.config(seed)
    write_weights(model_dir, recipe.tensors, seed=seed, std=recipe.weight_std)
    write_tokenizer(
        model_dir,
        model_max_length=int(config["max_position_embeddings"]),
        extra_tokens=recipe.extra_tokens,
    )
    write_json(
        model_dir / GENERATION_CONFIG_FILE,
        {
            "bos_token_id": BOS_TOKEN_ID,
            # <|im_end|> ends a chat turn, <|endoftext|> a plain completion.
            "eos_token_id": [EOS_TOKEN_ID, BOS_TOKEN_ID],
            "pad_token_id": PAD_TOKEN_ID,
        },
    )
    # config.json last: a directory with a config.json is a finished model to most tools.
    write_json(model_dir / CONFIG_FILE, config)


def _publish(staging: Path, out_dir: Path) -> None:
    try:
        # rename(2) replaces an empty directory and refuses a non-empty one, atomically.
        os.rename(staging, out_dir)
    except OSError as exc:
        raise FileExistsError(f"{out_dir} exists and is not empty") from exc
